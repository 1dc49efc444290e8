import type { Writable } from 'node:stream';

/** What a socket was handed: each `_write` or `_writev` is one system call; `chunks` counts the buffers in them. */
export interface SocketWrites {
  writes: number;
  chunks: number;
}

/**
 * Counts, from now on, the writes an ioredis client (or a cluster's node client) makes on its
 * current socket. The client must be connected: a socket made later is not counted.
 */
export function countSocketWrites(client: object, into: SocketWrites = { writes: 0, chunks: 0 }): SocketWrites {
  const stream = (client as { stream?: Writable }).stream;
  if (!stream) throw new Error('countSocketWrites: the client has no socket yet');
  const write = stream._write.bind(stream);
  stream._write = (chunk, encoding, cb) => {
    into.writes += 1;
    into.chunks += 1;
    write(chunk, encoding, cb);
  };
  const writev = stream._writev?.bind(stream);
  if (writev) {
    stream._writev = (chunks, cb) => {
      into.writes += 1;
      into.chunks += chunks.length;
      writev(chunks, cb);
    };
  }
  return into;
}
