/**
 * Whether Postgres is answering the statements that make first attempts: the fan-out's routes read
 * and the record of new deliveries. Held routes are used only while it is, so that a first attempt
 * is never sent from memory at a moment its record would fail (it would be sent again later).
 */
export interface PostgresWatch {
  /** Passes a statement's outcome through, noting when it succeeded or failed. */
  observe<T>(statement: Promise<T>): Promise<T>;
  /** Whether an observed statement succeeded within `ms`, with none failed and no connection lost since. */
  answeredWithin(ms: number): boolean;
}

/** `onConnectionLost` registers a listener for a connection lost while idle (the pool's 'error'). */
export function createPostgresWatch(onConnectionLost: (listener: () => void) => void): PostgresWatch {
  /** When an observed statement last succeeded; 0 once one has failed, or a connection was lost, since. */
  let answeredAt = 0;
  onConnectionLost(() => {
    answeredAt = 0;
  });
  return {
    observe: (statement) =>
      statement.then(
        (result) => {
          answeredAt = Date.now();
          return result;
        },
        (err: unknown) => {
          answeredAt = 0;
          throw err;
        },
      ),
    answeredWithin: (ms) => Date.now() - answeredAt <= ms,
  };
}
