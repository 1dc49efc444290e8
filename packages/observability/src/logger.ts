import pino, { type Logger } from 'pino';

/**
 * JSON logs. Whatever a caller passes, these paths are censored: a token or a secret must never
 * reach a log line even by mistake.
 */
export function createLogger(service: string, level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'authorization',
          'headers.authorization',
          'req.headers.authorization',
          'token',
          'secret',
          '*.secret',
          '*.token',
          'live',
          'test',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

export type { Logger };
