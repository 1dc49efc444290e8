import { Writable } from 'node:stream';
import { createLogger, type Logger } from '@svc/observability';

/** A real pino logger writing into memory, so a test can read every line a service wrote. */
export function captureLogs(service: string, level = 'debug'): { logger: Logger; lines: string[]; text(): string } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      cb();
    },
  });
  return { logger: createLogger(service, level, sink), lines, text: () => lines.join('\n') };
}
