import { Agent, createServer, request } from 'node:http';
import { closeServer, createStopStack, listen } from '@svc/observability';
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
