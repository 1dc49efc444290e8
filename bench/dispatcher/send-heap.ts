// `node --expose-gc --import tsx bench/dispatcher/send-heap.ts`: the JS heap one send in flight
// holds in the webhook sender (packages/webhook-sender: the body, its headers, undici's request, the
// deadline's timer, the promises), apart from its connection's (bench/README.md, "Heap per send").
// An HTTPS receiver on loopback (a child process, so its own objects are not counted) first answers
// SENDS requests at once, so the sender holds that many idle keep-alive connections; then it holds
// SENDS requests unanswered. The difference of the live
// heap (after a full collection) between the two, divided by SENDS, is what each send holds beyond
// its connection; heap snapshots of both say of what (BENCH_SNAPSHOTS=1).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { getHeapStatistics, writeHeapSnapshot } from 'node:v8';
import { attemptDelivery, createWebhookSender } from '@svc/webhook-sender';

const ROOT = join(__dirname, '..', '..');
const SENDS = Number(process.env.BENCH_SENDS ?? 1000);
const PORT = Number(process.env.BENCH_RECEIVER_PORT ?? 3921);
const certs = join(ROOT, '.test-certs');

const gc = (globalThis as { gc?: () => void }).gc;

/** The receiver, in its child process: answers at once, or holds every request until told; says how many it holds. */
function receiver(): void {
  let hold = false;
  const held: ServerResponse[] = [];
  const server = createServer({ key: readFileSync(join(certs, 'receiver.key')), cert: readFileSync(join(certs, 'receiver.pem')), keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on('end', () => {
      if (!hold) return res.end('ok');
      held.push(res);
      if (held.length % 100 === 0) process.send!({ held: held.length });
    });
  });
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'hold') hold = true;
    if (m.cmd === 'release') {
      hold = false;
      for (const res of held.splice(0)) res.end('ok');
    }
    if (m.cmd === 'exit') server.close(() => process.exit(0));
  });
  server.listen(PORT, '127.0.0.1', () => process.send!({ listening: true }));
}

/** Live JS heap after full collections, in bytes. */
async function liveHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await new Promise((r) => setImmediate(r));
  }
  return getHeapStatistics().used_heap_size;
}

/** Self size by constructor (V8's node name) in a heap snapshot file. */
function byConstructor(file: string): Map<string, { count: number; bytes: number }> {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snap.snapshot.meta.node_types[0];
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const key = type === 'object' || type === 'closure' ? `${type} ${snap.strings[snap.nodes[i + nameAt]!]}` : type;
    const e = out.get(key) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += snap.nodes[i + sizeAt]!;
    out.set(key, e);
  }
  return out;
}

async function main(): Promise<void> {
  if (!gc) throw new Error('run with node --expose-gc');
  const child = fork(__filename, ['receiver'], { execArgv: ['--import', 'tsx'] });
  let held = 0;
  child.on('message', (m: { held?: number }) => {
    if (m.held !== undefined) held = m.held;
  });
  await once(child, 'message');

  const sender = createWebhookSender({ hostMap: 'receiver.test=127.0.0.1', allowCidrs: '127.0.0.0/8', extraCaFile: join(certs, 'ca.pem'), timeoutMs: 60_000 });
  const send = (i: number) =>
    attemptDelivery(sender, {
      url: `https://receiver.test:${PORT}/hook`,
      secret: 'whsec_bench_0123456789abcdef0123456789abcdef',
      previousSecret: null,
      deliveryId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      eventId: `00000000-0000-4000-9000-${String(i).padStart(12, '0')}`,
      event: 'GUIA_ENTREGADA',
      data: { numeroGuia: `SVC${String(i).padStart(10, '0')}`, estado: 'ENTREGADA', fecha: new Date().toISOString() },
      sequence: 3,
      mode: 'live',
    });

  // SENDS at once, answered at once: SENDS connections opened and kept alive, idle.
  await Promise.all(Array.from({ length: SENDS }, (_, i) => send(i)));
  const idle = await liveHeap();
  if (process.env.BENCH_SNAPSHOTS) writeHeapSnapshot('/tmp/send-heap-idle.heapsnapshot');

  child.send({ cmd: 'hold' });
  await new Promise((r) => setTimeout(r, 100));
  const inFlight = Array.from({ length: SENDS }, (_, i) => send(SENDS + i));
  while (held < SENDS) await new Promise((r) => setTimeout(r, 50));
  const busy = await liveHeap();
  console.log(`${SENDS} sends in flight: live JS heap ${(idle / 1e6).toFixed(1)} MB idle (connections open), ${(busy / 1e6).toFixed(1)} MB holding them: ${((busy - idle) / SENDS / 1024).toFixed(2)} KB per send`);
  if (process.env.BENCH_SNAPSHOTS) {
    writeHeapSnapshot('/tmp/send-heap-busy.heapsnapshot');
    const a = byConstructor('/tmp/send-heap-idle.heapsnapshot');
    const b = byConstructor('/tmp/send-heap-busy.heapsnapshot');
    const rows = [...b].map(([k, v]) => ({ k, count: v.count - (a.get(k)?.count ?? 0), bytes: v.bytes - (a.get(k)?.bytes ?? 0) })).sort((x, y) => y.bytes - x.bytes);
    console.log('per send, by what holds it (heap snapshots, busy - idle):');
    for (const r of rows.slice(0, 25)) console.log(`  ${(r.bytes / SENDS).toFixed(0).padStart(6)} B  ${(r.count / SENDS).toFixed(2).padStart(6)} objects  ${r.k}`);
  }

  child.send({ cmd: 'release' });
  await Promise.all(inFlight);
  await sender.close();
  child.send({ cmd: 'exit' });
  await once(child, 'exit');
}

if (process.argv[2] === 'receiver') receiver();
else
  main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
