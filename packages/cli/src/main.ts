#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CliError } from './api.client.js';
import { eventos } from './eventos.command.js';
import { forwardTarget } from './forward-target.js';
import { listen } from './listen.command.js';
import { TRIGGER_EVENTS } from './status-machine.js';
import { trigger } from './trigger.command.js';

const DEFAULT_API = 'http://localhost:3000';

export const HELP = `svc: SVC sandbox events on your machine

Usage:
  svc listen --forward-to <url> [--events E1,E2]
  svc trigger <evento>
  svc eventos [--json]
  svc --help

Commands:
  listen    Opens a listening session and prints a line with its signing secret (whsec_...).
            Every sandbox event a test webhook of your token's scope would receive (the company's
            for a company token, one branch's for a branch token), filtered by --events, is POSTed
            to --forward-to with exactly a delivery's body and headers (X-SVC-*, webhook-*,
            User-Agent), signed with that secret; verify it as a real receiver would. One line per
            delivery: time, event, numeroGuia, the local answer's status (or TIMEOUT, CONNECTION)
            and its duration. The local answer decides the attempt: a 2xx within 5 s is a
            success; otherwise attempts 2 and 3 come 1 s and 2 s later. When the stream drops the
            tool reconnects by itself and says so (a new session, with a new secret, if the old
            one had ended). Ctrl-C ends the session. At most 5 sessions per company.
  trigger   Creates a sandbox shipment and moves it with simular along the shortest path of the
            status machine to <evento> (motivo and fechaEntrega get example values); prints its
            numeroGuia. Events: ${TRIGGER_EVENTS.join(', ')}.
  eventos   Prints the event catalog (GET /api/v1/eventos): each event and its description;
            --json prints every schema and example too.

Options:
  --token <token>       A test (sandbox) token; default: SVC_TOKEN. A live token is refused.
  --api <url>           The API; default: SVC_API, else ${DEFAULT_API}.
  --forward-to <url>    listen: where to POST each event: http://localhost:<port>/... or
                        http://127.0.0.1:<port>/... (plain HTTP to this machine only), or any https URL.
  --events <E1,E2>      listen: only these events (default: every one).
  --json                eventos: the whole catalog as JSON.
  -h, --help            This help.

Exit status: 0 on success (listen: once interrupted), 1 when the API or the local URL refuses
(the reason is printed in one line), 2 for a wrong command line.

Example:
  pnpm svc listen --forward-to http://localhost:4000/hook
  pnpm svc trigger GUIA_ENTREGADA
`;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        token: { type: 'string' },
        api: { type: 'string' },
        'forward-to': { type: 'string' },
        events: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(HELP);
    return command === undefined && !values.help ? 2 : 0;
  }
  const api = values.api ?? process.env.SVC_API ?? DEFAULT_API;
  try {
    new URL(api);
  } catch {
    throw new UsageError(`--api ${api} is not a URL`);
  }
  const token = values.token ?? process.env.SVC_TOKEN;
  if (!token) throw new UsageError('no token: pass --token <token> or set SVC_TOKEN (a test token of your company)');
  const print = (line: string): void => void process.stdout.write(`${line}\n`);
  const warn = (line: string): void => void process.stderr.write(`${line}\n`);

  switch (command) {
    case 'listen': {
      if (values['forward-to'] === undefined) throw new UsageError('listen needs --forward-to <url>, e.g. http://localhost:4000/hook');
      const events = (values.events ?? '').split(',').map((e) => e.trim()).filter((e) => e.length > 0);
      return listen({ api, token, forwardTo: forwardTarget(values['forward-to']), events, print, warn });
    }
    case 'trigger': {
      const evento = rest[0];
      if (evento === undefined) throw new UsageError(`trigger needs an event: one of ${TRIGGER_EVENTS.join(', ')}`);
      return trigger({ api, token, evento, print });
    }
    case 'eventos':
      return eventos({ api, token, json: values.json === true, print });
    default:
      throw new UsageError(`unknown command ${command}: listen, trigger or eventos (svc --help)`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`svc: ${err.message}\n`);
      process.exitCode = 2;
    } else if (err instanceof CliError) {
      process.stderr.write(`svc: ${err.message}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`svc: ${(err as Error).message}\n`);
      process.exitCode = 1;
    }
  },
);
