import { Agent, createServer, request } from 'node:http';
import { EventEmitter } from 'node:events';
import { closeServer, createStopStack, listen, runUntilSignal } from '@svc/observability';
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
});
