/**
 * Records the promise rejections nobody handled while a describe block runs (its beforeAll hooks
 * included, when called before them), so a test can assert there were none.
 */
export function recordUnhandledRejections(): unknown[] {
  const seen: unknown[] = [];
  const record = (reason: unknown): void => void seen.push(reason);
  beforeAll(() => void process.on('unhandledRejection', record));
  afterAll(() => void process.off('unhandledRejection', record));
  return seen;
}
