import { Agent, createServer, request } from 'node:http';
import { EventEmitter } from 'node:events';
import { closeServer, createStopStack, listen, runService, runUntilSignal, StopTimeoutError } from '@svc/platform';
import { captureLogs } from '../../../test/support/log-capture';

describe('createStopStack', () => {
  it('undoes in reverse order, runs every step though one fails, and logs the failure', async () => {
    const { logger, lines } = captureLogs('t');
    const stack = createStopStack(logger);
    const ran: string[] = [];
    stack.push('db', async () => void ran.push('db'));
    stack.push('redis', async () => {
      ran.push('redis');
      throw new Error('already closed');
    });
    stack.push('server', async () => void ran.push('server'));
    await stack.stop();
    expect(ran).toEqual(['server', 'redis', 'db']);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ step: 'redis', err: 'already closed', msg: 'stop step failed' }),
    ]);
  });

  it('runs each step once when stop() is called again during and after the first', async () => {
    const stack = createStopStack(captureLogs('t').logger);
    let runs = 0;
    let release!: () => void;
    stack.push('slow', () => new Promise<void>((r) => ((release = r), runs++)));
    const first = stack.stop();
    const second = stack.stop();
    release();
    await Promise.all([first, second]);
    await stack.stop();
    expect(runs).toBe(1);
  });

  it('rejects once timeoutMs has passed, naming the step still running at error level; the steps undone before it ran', async () => {
    const { logger, lines } = captureLogs('t');
    const stack = createStopStack(logger, { timeoutMs: 50 });
    const ran: string[] = [];
    stack.push('db', async () => void ran.push('db'));
    stack.push('workers', () => new Promise<void>(() => undefined)); // a delivery that never ends
    stack.push('metrics server', async () => void ran.push('metrics server'));
    const failure = await stack.stop().then(() => undefined, (err: unknown) => err);
    expect(failure).toBeInstanceOf(StopTimeoutError);
    expect(failure).toMatchObject({ step: 'workers', timeoutMs: 50 });
    expect(ran).toEqual(['metrics server']);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 50, step: 'workers', timeoutMs: 50, msg: expect.stringMatching(/deadline/) }),
    ]);
  });

  it('resolves as before when every step ends within timeoutMs', async () => {
    const { logger, lines } = captureLogs('t');
    const stack = createStopStack(logger, { timeoutMs: 60_000 });
    stack.push('quick', () => new Promise<void>((r) => setTimeout(r, 10)));
    await stack.stop();
    expect(lines).toEqual([]);
  });
});

describe('listen and closeServer', () => {
  it('takes a free port, and closes with an idle keep-alive connection open', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    const port = await listen(server, 0);
    expect(port).toBeGreaterThan(0);
    const agent = new Agent({ keepAlive: true });
    const body = await new Promise<string>((resolve, reject) => {
      request({ port, host: '127.0.0.1', agent }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(text));
      })
        .on('error', reject)
        .end();
    });
    expect(body).toBe('ok');
    await closeServer(server); // would hang on the idle keep-alive socket without closeIdleConnections
    expect(server.listening).toBe(false);
    agent.destroy();
  });

  it('rejects when the port is taken', async () => {
    const a = createServer();
    const port = await listen(a, 0);
    await expect(listen(createServer(), port)).rejects.toThrow(/EADDRINUSE/);
    await closeServer(a);
  });
});

describe('runUntilSignal', () => {
  const harness = () => {
    const signals = new EventEmitter();
    const exits: number[] = [];
    let exited!: () => void;
    const exitedOnce = new Promise<void>((r) => (exited = r));
    const exit = (code: number): void => {
      exits.push(code);
      exited();
    };
    return { signals, exits, exitedOnce, exit, log: captureLogs('t') };
  };

  it('stops on the first signal only, then exits 0', async () => {
    const h = harness();
    let stops = 0;
    await runUntilSignal(h.log.logger, async () => ({ stop: async () => void stops++ }), { finishing: 'work', signals: h.signals, exit: h.exit });
    h.signals.emit('SIGTERM');
    h.signals.emit('SIGINT');
    await h.exitedOnce;
    expect({ stops, exits: h.exits }).toEqual({ stops: 1, exits: [0] });
    expect(h.log.lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ signal: 'SIGTERM', msg: 'stopping: finishing work' }),
    ]);
  });

  it('lets a start that a signal interrupts finish, then stops what it built', async () => {
    const h = harness();
    let finishStart!: () => void;
    const ran: string[] = [];
    const running = runUntilSignal(
      h.log.logger,
      async () => {
        await new Promise<void>((r) => (finishStart = r));
        ran.push('started');
        return { stop: async () => void ran.push('stopped') };
      },
      { finishing: 'work', signals: h.signals, exit: h.exit },
    );
    h.signals.emit('SIGINT');
    expect(ran).toEqual([]);
    finishStart();
    await running;
    await h.exitedOnce;
    expect({ ran, exits: h.exits }).toEqual({ ran: ['started', 'stopped'], exits: [0] });
  });

  it('exits 1 when the stop fails, and rejects when the start fails', async () => {
    const h = harness();
    await runUntilSignal(h.log.logger, async () => ({ stop: () => Promise.reject(new Error('stuck')) }), { finishing: 'work', signals: h.signals, exit: h.exit });
    h.signals.emit('SIGTERM');
    await h.exitedOnce;
    expect(h.exits).toEqual([1]);
    await expect(runUntilSignal(h.log.logger, () => Promise.reject(new Error('no db')), { finishing: 'work', signals: new EventEmitter(), exit: h.exit })).rejects.toThrow('no db');
  });

  // SHUTDOWN_TIMEOUT_MS: a stack built with it, as the services build theirs.
  const serviceWithStep = (log: ReturnType<typeof captureLogs>, timeoutMs: number, step: () => Promise<unknown>) => async () => {
    const stack = createStopStack(log.logger, { timeoutMs });
    stack.push('db', async () => undefined);
    stack.push('http server', step);
    return stack;
  };

  it('exits 1 after the deadline when a stop step never resolves, having logged that step at error level', async () => {
    const h = harness();
    await runUntilSignal(h.log.logger, serviceWithStep(h.log, 100, () => new Promise<void>(() => undefined)), { finishing: 'work', signals: h.signals, exit: h.exit });
    const signalled = Date.now();
    h.signals.emit('SIGTERM');
    await h.exitedOnce;
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(90);
    expect(h.exits).toEqual([1]);
    const errors = h.log.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.level === 50);
    expect(errors).toEqual([expect.objectContaining({ step: 'http server', timeoutMs: 100 })]);
  });

  it('exits 0 when a quick stop ends within the deadline', async () => {
    const h = harness();
    await runUntilSignal(h.log.logger, serviceWithStep(h.log, 5000, () => new Promise<void>((r) => setTimeout(r, 20))), { finishing: 'work', signals: h.signals, exit: h.exit });
    h.signals.emit('SIGINT');
    await h.exitedOnce;
    expect(h.exits).toEqual([0]);
    expect(h.log.lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50)).toEqual([]);
  });
});

describe('runService', () => {
  const exits = () => {
    const codes: number[] = [];
    let exited!: () => void;
    const once = new Promise<void>((r) => (exited = r));
    return { codes, once, exit: (code: number) => void (codes.push(code), exited()) };
  };
  let stderr: jest.SpyInstance;
  beforeEach(() => {
    stderr = jest.spyOn(console, 'error').mockImplementation(() => undefined);
  });
  afterEach(() => stderr.mockRestore());

  it('exits 2 with the settings problems on stderr, starting nothing, when the settings are bad', async () => {
    const e = exits();
    let starts = 0;
    await runService({
      name: 'svc',
      loadConfig: () => {
        throw new Error('svc: invalid settings:\n  - PORT must be an integer');
      },
      start: async () => ({ stop: async () => void starts++ }),
      finishing: 'work',
      signals: new EventEmitter(),
      exit: e.exit,
    });
    expect({ codes: e.codes, starts }).toEqual({ codes: [2], starts: 0 });
    expect(stderr).toHaveBeenCalledWith('svc: invalid settings:\n  - PORT must be an integer');
  });

  it('exits 1 when the start fails, saying so', async () => {
    const e = exits();
    await runService({
      name: 'svc',
      loadConfig: () => ({ logLevel: 'silent' }),
      start: () => Promise.reject(new Error('no db')),
      finishing: 'work',
      signals: new EventEmitter(),
      exit: e.exit,
    });
    expect(e.codes).toEqual([1]);
    expect(stderr).toHaveBeenCalledWith('svc failed to start: no db');
  });

  it('starts with the settings and a logger, then stops on a signal and exits 0', async () => {
    const e = exits();
    const signals = new EventEmitter();
    const seen: unknown[] = [];
    await runService({
      name: 'svc',
      loadConfig: () => ({ logLevel: 'silent', port: 1 }),
      start: async (config, { logger }) => {
        seen.push(config, logger.level);
        return { stop: async () => void seen.push('stopped') };
      },
      finishing: 'work',
      signals,
      exit: e.exit,
    });
    signals.emit('SIGTERM');
    await e.once;
    expect({ seen, codes: e.codes }).toEqual({ seen: [{ logLevel: 'silent', port: 1 }, 'silent', 'stopped'], codes: [0] });
  });
});
