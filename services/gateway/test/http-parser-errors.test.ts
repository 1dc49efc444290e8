import { connect } from 'node:net';
import { bearer, createCompany, startGatewayFixture, type GatewayFixture, type TestGateway } from '../../../test/support/test-gateway';
import { parseExposition } from '../../../test/support/prometheus-text';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes bytes on a fresh connection and reads until a complete answer arrived (and 20 ms more, for
 * any second one) or the server closed. An incomplete request is answered only once the server sees
 * the end of it, so the connection is half-closed if no answer came within HALF_CLOSE_MS; not at
 * once, since Node drops a request whose client ended before the answer was written.
 */
const HALF_CLOSE_MS = 250;
function rawExchange(port: number, bytes: string | Buffer, timeoutMs = 5000): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1');
    let settling: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(timer);
      clearTimeout(halfClose);
      clearTimeout(settling);
      socket.destroy();
      resolve(Buffer.concat(chunks));
    };
    const timer = setTimeout(done, timeoutMs);
    const halfClose = setTimeout(() => socket.end(), HALF_CLOSE_MS);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (settling) return;
      try {
        if (parseAnswers(Buffer.concat(chunks)).length > 0) settling = setTimeout(done, 20);
      } catch {
        // not complete yet
      }
    });
    socket.on('close', done);
    socket.on('error', done);
    socket.write(bytes);
  });
}

/** Every final (non-1xx) answer in the bytes; a HEAD answer has no body whatever its length says. */
function parseAnswers(raw: Buffer, head = false): RawAnswer[] {
  const answers: RawAnswer[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) throw new Error(`incomplete answer: ${JSON.stringify(rest.toString('latin1').slice(0, 200))}`);
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? '');
    if (!m) throw new Error(`not a status line: ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const status = Number(m[1]);
    const length = head || status < 200 ? 0 : Number(headers['content-length'] ?? 0);
    const body = rest.subarray(end + 4, end + 4 + length);
    if (body.length < length) throw new Error(`short body (${body.length} of ${length})`);
    rest = rest.subarray(end + 4 + length);
    if (status >= 200) answers.push({ status, headers, body: body.toString('utf8') });
  }
  return answers;
}

async function ask(port: number, bytes: string | Buffer): Promise<RawAnswer> {
  const answers = parseAnswers(await rawExchange(port, bytes));
  expect(answers).toHaveLength(1);
  return answers[0]!;
}

/** The envelope, JSON, with an X-Request-Id: what every answer must be. */
function expectEnvelope(answer: RawAnswer, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toMatch(/^application\/json/);
  expect(answer.headers['x-request-id']).toMatch(/^[A-Za-z0-9._:-]{8,128}$/);
  expect(JSON.parse(answer.body)).toEqual({ success: false, error: { code, message: expect.any(String) } });
}

const isEnvelope = (body: string): boolean => {
  try {
    const parsed = JSON.parse(body) as { success?: unknown; error?: { code?: unknown; message?: unknown } };
    const keys = Object.keys(parsed).sort().join();
    return parsed.success === false && keys === 'error,success' && typeof parsed.error?.code === 'string' && typeof parsed.error.message === 'string';
  } catch {
    return false;
  }
};

describe("answers from Node's HTTP parser", () => {
  let fx: GatewayFixture;
  let gw: TestGateway;
  let token: string;

  beforeAll(async () => {
    fx = await startGatewayFixture('http-parser');
    ({ gw } = fx);
    token = (await createCompany(gw)).live;
  });
  afterAll(() => fx?.stop());

  const get = (extra = '') => `GET /api/v1/empresa HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;

  it('a bad request line is 400 with the envelope', async () => {
    expectEnvelope(await ask(gw.port, 'GET /api/v1/empresa NOT-HTTP\r\nHost: x\r\n\r\n'), 400, 'VALIDATION_ERROR');
    expectEnvelope(await ask(gw.port, 'this is not http at all\r\n\r\n'), 400, 'VALIDATION_ERROR');
  });

  it('a bad method is 400 with the envelope', async () => {
    expectEnvelope(await ask(gw.port, 'FETCH /api/v1/empresa HTTP/1.1\r\nHost: x\r\n\r\n'), 400, 'VALIDATION_ERROR');
  });

  it('headers over the limit are 431 with the envelope', async () => {
    expectEnvelope(await ask(gw.port, get(`X-Big: ${'a'.repeat(20_000)}\r\n`)), 431, 'PAYLOAD_TOO_LARGE');
    const many = Array.from({ length: 2000 }, (_, i) => `X-H${i}: ${'v'.repeat(10)}\r\n`).join('');
    expectEnvelope(await ask(gw.port, get(many)), 431, 'PAYLOAD_TOO_LARGE');
  });

  it('an Expect other than 100-continue is 417 with the envelope, keeping a caller X-Request-Id', async () => {
    const answer = await ask(gw.port, get('Expect: something-odd\r\nX-Request-Id: trace-expect-0001\r\n'));
    expectEnvelope(answer, 417, 'VALIDATION_ERROR');
    expect(answer.headers['x-request-id']).toBe('trace-expect-0001');
    expect(answer.headers.connection).toBe('close');
  });

  it('an HTTP/1.1 request without Host is 400 with the envelope; HTTP/1.0 needs none', async () => {
    expectEnvelope(await ask(gw.port, 'GET /api/v1/empresa HTTP/1.1\r\n\r\n'), 400, 'VALIDATION_ERROR');
    expectEnvelope(await ask(gw.port, 'GET /api/v1/empresa HTTP/1.0\r\n\r\n'), 401, 'AUTH_REQUIRED');
  });

  it('CONNECT, which never reaches the app, is 405 with the envelope; an Upgrade request is an ordinary one', async () => {
    expectEnvelope(await ask(gw.port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'), 405, 'METHOD_NOT_ALLOWED');
    expectEnvelope(await ask(gw.port, get('Connection: Upgrade\r\nUpgrade: websocket\r\n')), 401, 'AUTH_REQUIRED');
  });

  it('Expect: 100-continue goes on to the app, whose answer is the envelope', async () => {
    const body = '{"nombre":"x"}';
    const raw = `POST /api/v1/guias HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    expectEnvelope(await ask(gw.port, raw), 401, 'AUTH_REQUIRED');
  });

  it('conflicting Content-Length and Transfer-Encoding, a duplicate Content-Length, an invalid header character: 400', async () => {
    const post = (headers: string, body = '') => `POST /api/v1/guias HTTP/1.1\r\nHost: x\r\nAuthorization: ${bearer(token)}\r\nContent-Type: application/json\r\n${headers}\r\n${body}`;
    const cases = [
      post('Content-Length: 2\r\nTransfer-Encoding: chunked\r\n', '2\r\n{}\r\n0\r\n\r\n'),
      post('Content-Length: 2\r\nContent-Length: 3\r\n', '{} '),
      post('Content-Length: 2\r\nContent-Length: 2\r\n', '{}'),
      post('Transfer-Encoding: chunked, identity\r\n', '2\r\n{}\r\n0\r\n\r\n'),
      get('X-Bad\u0001Name: 1\r\n'),
      get('X-Bad: a\u0000b\r\n'),
      'GET /api/v1/empresa HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n',
    ];
    for (const raw of cases) expectEnvelope(await ask(gw.port, raw), 400, 'VALIDATION_ERROR');
  });

  it('a malformed chunked body after the headers were read keeps the request id of the request', async () => {
    const raw = `POST /api/v1/guias HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-chunk-00001\r\nAuthorization: ${bearer(token)}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`;
    const answer = await ask(gw.port, raw);
    expectEnvelope(answer, 400, 'VALIDATION_ERROR');
    expect(answer.headers['x-request-id']).toBe('trace-chunk-00001');
  });

  it('counts them under route="(unparsed)" and logs them in the access log format', async () => {
    await ask(gw.port, 'FETCH / HTTP/1.1\r\n\r\n');
    const answer = await ask(gw.port, get('Expect: nope\r\n'));
    const text = await (await fetch(`http://127.0.0.1:${gw.metricsPort}/metrics`)).text();
    const samples = parseExposition(text).get('svc_http_requests_total')!.samples;
    const unparsed = (status: string) => samples.find((s) => s.labels.route === '(unparsed)' && s.labels.status === status)?.value ?? 0;
    expect(unparsed('400')).toBeGreaterThan(0);
    expect(unparsed('431')).toBeGreaterThan(0);
    expect(samples.find((s) => s.labels.route === '(unparsed)' && s.labels.status === '417')?.labels.method).toBe('GET');
    const line = gw.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === answer.headers['x-request-id']);
    expect(line).toMatchObject({ msg: 'request', method: 'GET', route: '(unparsed)', status: 417, ms: expect.any(Number) });
  });

  it('a seeded fuzz of 2,000 malformed requests over every route: every answer is the envelope, none 5xx', async () => {
    const rng = mulberry32(14);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
    const PATHS = [
      '/api/v1/empresa', '/api/v1/guias', '/api/v1/guias/batch', '/api/v1/guias?limit=5', '/api/v1/guias/GT1/tracking', '/api/v1/guias/GT1/simular',
      '/api/v1/webhooks', '/api/v1/webhooks/00000000-0000-4000-8000-000000000000', '/api/v1/webhooks/x/test', '/api/v1/webhooks/x/entregas',
      '/api/v1/webhooks/x/entregas/y', '/api/v1/webhooks/x/entregas/y/reenviar', '/api/v1/webhooks/x/recuperar', '/api/v1/webhooks/x/secreto',
      '/internal/v1/empresas', '/internal/v1/empresas/x', '/internal/v1/empresas/x/creditos', '/internal/v1/empresas/x/sucursales',
      '/internal/v1/guias/GT1/eventos', '/internal/v1/empresas/x/sucursales/y/webhooks', '/', '*', 'http://x/api/v1/guias', '/%zz', '//a/../b',
    ];
    const METHODS = ['GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'OPTIONS', 'FETCH', 'G ET', 'get', '', 'CONNECT', 'TRACE', 'PRI'];
    const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.x', 'http/1.1', 'HTTP/9', '', 'HTTP/1.1 extra'];
    const HEADERS = [
      'Content-Length: 2\r\nTransfer-Encoding: chunked',
      'Content-Length: 2\r\nContent-Length: 5',
      'Content-Length: -1',
      'Content-Length: 99999999999999999999',
      'Transfer-Encoding: gzip',
      'Transfer-Encoding: chunked',
      'Expect: 100-continue',
      'Expect: weird',
      `X-Big: ${'b'.repeat(17_000)}`,
      'Bad Header: 1',
      'X-Ctl: a\u0001b',
      ' folded: 1',
      ':empty-name',
      'Content-Type: application/json',
      'Authorization: Bearer svc_live_fuzz',
      'Content-Encoding: gzip',
      'X-Request-Id: fuzz-request-0001',
    ];
    const BODIES = ['', '{}', '{"a":', '5\r\n{"a":1\r\n0\r\n\r\n', 'zz\r\nxx\r\n', '0\r\n\r\n', '\u0000\u0001\u0002', '[1,2,3]'];
    const mutate = (s: string): string => {
      const chars = [...s];
      const n = 1 + Math.floor(rng() * 3);
      for (let i = 0; i < n && chars.length > 0; i++) {
        const at = Math.floor(rng() * chars.length);
        const op = rng();
        if (op < 0.4) chars[at] = String.fromCharCode(Math.floor(rng() * 256));
        else if (op < 0.7) chars.splice(at, 0, pick(['\r', '\n', '\r\n', ' ', ':', '\u0000', '\t', '"']));
        else chars.splice(at, 1);
      }
      return chars.join('');
    };
    const generate = (): string => {
      const headers = [...(rng() < 0.9 ? ['Host: x'] : []), ...Array.from({ length: Math.floor(rng() * 4) }, () => pick(HEADERS))];
      let req = `${pick(METHODS)} ${pick(PATHS)} ${pick(VERSIONS)}\r\n${headers.join('\r\n')}\r\n\r\n${pick(BODIES)}`;
      if (rng() < 0.5) req = mutate(req);
      return req;
    };

    // FUZZ_REQUESTS=10000 for a longer run by hand; the suite runs the seeded 2,000.
    const requests = Array.from({ length: Number(process.env.FUZZ_REQUESTS ?? 2000) }, generate);
    const outcomes: Array<{ request: string; answers: RawAnswer[] | Error }> = [];
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const request = requests[next++]!;
        const raw = await rawExchange(gw.port, Buffer.from(request, 'latin1'), 10_000);
        let answers: RawAnswer[] | Error;
        try {
          answers = parseAnswers(raw, request.startsWith('HEAD '));
        } catch (err) {
          answers = err as Error;
          if (process.env.FUZZ_DEBUG) process.stdout.write(`unparseable answer to ${JSON.stringify(request)}: ${JSON.stringify(raw.toString('latin1'))}\n`);
        }
        outcomes.push({ request, answers });
      }
    };
    await Promise.all(Array.from({ length: 25 }, worker));

    const bad = outcomes.flatMap(({ request, answers }) =>
      answers instanceof Error
        ? [{ request, problem: answers.message }]
        : answers
            .filter((a) => a.status >= 500 || (a.status >= 400 && (!isEnvelope(a.body) || !a.headers['x-request-id'])))
            .map((a) => ({ request, problem: `${a.status} ${JSON.stringify(a.headers)} ${a.body.slice(0, 200)}` })),
    );
    const answered = outcomes.filter((o) => !(o.answers instanceof Error) && o.answers.length > 0).length;
    const statuses = new Map<number, number>();
    for (const o of outcomes) if (!(o.answers instanceof Error)) for (const a of o.answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    // The figures of the run, for the record of what the fuzz covered.
    process.stdout.write(`fuzz: ${outcomes.length} requests, ${answered} answered, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}\n`);
    if (process.env.FUZZ_DEBUG) for (const o of outcomes) if (!(o.answers instanceof Error) && o.answers.length === 0) process.stdout.write(`unanswered: ${JSON.stringify(o.request.slice(0, 300))}\n`);
    expect(bad.slice(0, 5)).toEqual([]);
    expect(answered).toBe(requests.length);
  }, 120_000);
});

/** A small seeded PRNG, so a failing fuzz case can be replayed. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
