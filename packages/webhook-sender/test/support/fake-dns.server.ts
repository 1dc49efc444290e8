import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { AUTHORITATIVE_ANSWER, decode, encode, RECURSION_AVAILABLE, RECURSION_DESIRED, type Answer } from 'dns-packet';

/**
 * A name server on UDP 127.0.0.1 for the resolver's tests, speaking real DNS (dns-packet):
 *
 *   const dns = await startFakeDns({ 'receiver.test': { a: ['127.0.0.1'], ttl: 1 } });
 *   createWebhookSender({ ..., dnsServers: [dns.server] });   // '127.0.0.1:<port>'
 *   dns.count('receiver.test', 'A');                           // queries seen
 *
 * A name it does not know gets NXDOMAIN; a known name without records of the asked type gets an
 * empty answer (NODATA). `silent: true` swallows every query: a name server that never answers.
 */

export interface ZoneEntry {
  a?: string[];
  aaaa?: string[];
  /** Seconds. Default 60. */
  ttl?: number;
  /** Answers with this DNS error code instead (2 SERVFAIL, 5 REFUSED). */
  rcode?: number;
  /** Waits this long before answering. */
  delayMs?: number;
  /** Question types never answered (a name server that drops AAAA questions, say). */
  drop?: string[];
}

export interface FakeDnsOptions {
  silent?: boolean;
}

export interface FakeDns {
  /** `127.0.0.1:<port>`, for `dnsServers`. */
  server: string;
  /** Every question received, in order (names lowercased). */
  readonly queries: ReadonlyArray<{ name: string; type: string }>;
  /** Questions for `name` (of `type` when given). */
  count(name: string, type?: string): number;
  /** Adds or replaces a name. */
  set(name: string, entry: ZoneEntry): void;
  close(): Promise<void>;
}

const NXDOMAIN = 3;

export async function startFakeDns(zone: Record<string, ZoneEntry> = {}, options: FakeDnsOptions = {}): Promise<FakeDns> {
  const names = new Map(Object.entries(zone).map(([name, entry]) => [name.toLowerCase(), entry]));
  const queries: Array<{ name: string; type: string }> = [];
  const timers = new Set<NodeJS.Timeout>();
  const socket = createSocket('udp4');

  socket.on('message', (message, peer) => {
    let query;
    try {
      query = decode(message);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (question === undefined) return;
    const name = question.name.toLowerCase();
    queries.push({ name, type: question.type });
    if (options.silent === true) return;

    const entry = names.get(name);
    if (entry?.drop?.includes(question.type) === true) return;
    const ttl = entry?.ttl ?? 60;
    const records = question.type === 'A' ? entry?.a : question.type === 'AAAA' ? entry?.aaaa : undefined;
    const answers: Answer[] = (records ?? []).map((data) => ({ type: question.type as 'A' | 'AAAA', class: 'IN', name: question.name, ttl, data }));
    const rcode = entry === undefined ? NXDOMAIN : (entry.rcode ?? 0);
    const reply = encode({
      type: 'response',
      id: query.id,
      // The low four bits of the flags are the response code.
      flags: AUTHORITATIVE_ANSWER | RECURSION_DESIRED | RECURSION_AVAILABLE | rcode,
      questions: [question],
      answers: rcode === 0 ? answers : [],
    });
    const send = (): void => socket.send(reply, peer.port, peer.address);
    if (entry?.delayMs === undefined) {
      send();
      return;
    }
    const timer = setTimeout(() => {
      timers.delete(timer);
      send();
    }, entry.delayMs);
    timers.add(timer);
  });

  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  const { port } = socket.address() as AddressInfo;

  return {
    server: `127.0.0.1:${port}`,
    queries,
    count: (name, type) => queries.filter((q) => q.name === name.toLowerCase() && (type === undefined || q.type === type)).length,
    set: (name, entry) => void names.set(name.toLowerCase(), entry),
    async close() {
      for (const timer of timers) clearTimeout(timer);
      await new Promise<void>((resolve) => socket.close(() => resolve()));
    },
  };
}
