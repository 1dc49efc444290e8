// The benchmark's receiver, in its own process: HTTPS with keep-alive on loopback, answering 200
// at once with an empty body. It counts requests and TLS handshakes (new sessions) and, while
// asked to, notes when each delivery (X-Request-Id) arrived. The parent talks to it over IPC.
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const certs = join(__dirname, '..', '..', '.test-certs');
const port = Number(process.env.RECEIVER_PORT ?? 3943);

let requests = 0;
let handshakes = 0;
let resumed = 0;
let recording = false;
let receipts: Array<[string, number]> = [];

const server = createServer(
  { key: readFileSync(join(certs, 'receiver.key')), cert: readFileSync(join(certs, 'receiver.pem')), keepAliveTimeout: 60_000 },
  (req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      if (recording) receipts.push([String(req.headers['x-request-id']), performance.timeOrigin + performance.now()]);
      res.writeHead(200, { 'content-length': '0' }).end();
    });
  },
);
server.on('secureConnection', (socket) => {
  handshakes++;
  if (socket.isSessionReused()) resumed++;
});

process.on('message', (msg: { cmd: string }) => {
  switch (msg.cmd) {
    case 'stats':
      process.send?.({ requests, handshakes, resumed });
      break;
    case 'record':
      receipts = [];
      recording = true;
      process.send?.({ ok: true });
      break;
    case 'receipts':
      recording = false;
      process.send?.({ receipts });
      receipts = [];
      break;
    case 'exit':
      server.close();
      process.exit(0);
  }
});

server.listen(port, '127.0.0.1', () => process.send?.({ listening: port }));
