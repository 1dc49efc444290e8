/** Resolves after `ms` milliseconds: the one sleep of the tests. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls until `probe` resolves true and returns how long it took; throws naming `what` past the
 * deadline. Deadlines are generous: they bound a hang, they do not measure speed.
 */
export async function eventually(probe: () => Promise<boolean>, timeoutMs: number, what: string, everyMs = 100): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await probe()) return Date.now() - start;
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}
