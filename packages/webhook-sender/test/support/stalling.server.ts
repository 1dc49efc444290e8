import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { TEST_CERT_DIR } from '../../../../test/support/https-receiver';

/** Receivers that never finish, each in its own way, on 127.0.0.1. */

export interface StallingServer {
  port: number;
  /** TCP connections accepted. */
  readonly connections: number;
  /** Body bytes written so far (the trickler only). */
  readonly bytesWritten: number;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Accepts TCP and then says nothing: the TLS handshake never completes. */
export async function startTlsStaller(): Promise<StallingServer> {
  const held = new Set<Socket>();
  let connections = 0;
  const server = createTcpServer((socket) => {
    connections += 1;
    held.add(socket);
    socket.on('close', () => held.delete(socket));
    // Reads (and ignores) the ClientHello, so the client's writes never block.
    socket.resume();
  });
  const port = await listen(server);
  return {
    port,
    get connections() {
      return connections;
    },
    bytesWritten: 0,
    async close() {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Completes TLS (receiver.test's certificate), answers 200 with its headers at once, then sends its
 * body one byte every `intervalMs`, never ending it.
 */
export async function startTrickler(intervalMs = 100): Promise<StallingServer> {
  const held = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let connections = 0;
  let bytesWritten = 0;
  const server = createHttpsServer(
    { cert: readFileSync(join(TEST_CERT_DIR, 'receiver.pem')), key: readFileSync(join(TEST_CERT_DIR, 'receiver.key')) },
    (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.flushHeaders();
        const timer = setInterval(() => {
          res.write('.');
          bytesWritten += 1;
        }, intervalMs);
        timers.add(timer);
        res.on('close', () => {
          clearInterval(timer);
          timers.delete(timer);
        });
      });
    },
  );
  server.on('connection', (socket: Socket) => {
    connections += 1;
    held.add(socket);
    socket.on('close', () => held.delete(socket));
  });
  server.on('tlsClientError', () => undefined);
  const port = await listen(server);
  return {
    port,
    get connections() {
      return connections;
    },
    get bytesWritten() {
      return bytesWritten;
    },
    async close() {
      for (const timer of timers) clearInterval(timer);
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
