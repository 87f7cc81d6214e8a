// `shardwise serve [--port P] [--host H] [--runs DIR] [--demo] [--rotate-token]`: the controller
// and the dashboard in web mode. Binds to loopback unless --host says otherwise; prints the URL
// with its token (http://127.0.0.1:P/#token=...), which is kept in <runs>/.serve-token (0600) so
// that a restart does not strand open tabs; --rotate-token replaces it first. --demo (what `npm start` passes): on an empty runs
// folder, launch the demo run first and make the URL open its page. Ctrl-C stops every live run
// (they end as stopped, resumable) before exiting.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type DemoRun, startDemoIfFirst } from '../controller/demo-run.js';
import { ControllerService } from '../controller/service.js';
import { startServer } from '../serve/server.js';
import { loadOrCreateToken, rotateToken, TOKEN_FILE, tokenPath } from '../serve/token-store.js';
import { CliError } from './errors.js';

const USAGE = 'usage: shardwise serve [--port P] [--host H] [--runs DIR] [--demo] [--rotate-token]';
export const DEFAULT_SERVE_PORT = 7411;

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export async function serveCommand(argv: string[]): Promise<number> {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        runs: { type: 'string' },
        demo: { type: 'boolean' },
        'rotate-token': { type: 'boolean' },
        help: { type: 'boolean' },
      },
    }).values;
  } catch (e) {
    throw new CliError(`${(e as Error).message.split('\n')[0]}; ${USAGE}`);
  }
  if (v.help) {
    process.stdout.write(
      `${USAGE}\n  the controller's API over WebSocket and the dashboard for a browser; loopback (127.0.0.1) unless --host\n` +
        `  --demo: on an empty runs folder, first launch a demo run (tiny, ddp, world 2) and open the dashboard on it\n` +
        `  the token is kept in <runs>/${TOKEN_FILE} (mode 0600): a restart keeps it, so open tabs reconnect by themselves\n` +
        `  --rotate-token: replace the stored token first (tabs holding the old one are refused and ask for the new URL)\n`,
    );
    return 0;
  }
  const port = v.port === undefined ? DEFAULT_SERVE_PORT : Number(v.port);
  if (!/^\d+$/.test(v.port ?? '0') || port > 65535) throw new CliError(`--port must be 0..65535 (0: any free port), got "${v.port}"`);
  const host = v.host ?? '127.0.0.1';
  const runsRoot = path.resolve(v.runs ?? 'runs');

  let token: string;
  try {
    token = v['rotate-token'] ? rotateToken(runsRoot) : loadOrCreateToken(runsRoot).token;
  } catch (e) {
    throw new CliError(`the serve token: ${(e as Error).message}`);
  }
  if (v['rotate-token'])
    process.stdout.write(`shardwise serve: a new token is in ${tokenPath(runsRoot)}; tabs opened with the old one must open the new URL\n`);

  const service = new ControllerService({ runsRoot, profileInBackground: (line) => process.stdout.write(`shardwise serve: ${line}\n`) });
  service.start();
  let server;
  try {
    server = await startServer(service, { host, port, version: version(), token });
  } catch (e) {
    await service.close();
    const err = e as NodeJS.ErrnoException;
    throw new CliError(
      err.code === 'EADDRINUSE'
        ? `port ${port} on ${host} is in use; pick another with --port (0: any free port)`
        : `could not listen on ${host}:${port}: ${err.message}`,
    );
  }
  if (!['127.0.0.1', '::1', 'localhost'].includes(host)) {
    process.stderr.write(
      `shardwise serve: listening on ${host}, not only loopback: anyone who can reach it and holds the token controls this machine's runs\n`,
    );
  }
  // a Ctrl-C in a terminal reaches every process of its group: `npm start`'s launcher passes it
  // on too, so a second one must not kill this process halfway through stopping its runs
  let stopping = false;
  const stopped = new Promise<void>((resolve) => {
    const onSignal = () => {
      if (!stopping) resolve();
      stopping = true;
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  process.stdout.write(`shardwise serve: runs in ${runsRoot}\n`);
  let demo: DemoRun | null = null;
  if (v.demo) {
    try {
      demo = await startDemoIfFirst(service, (line) => process.stdout.write(`${line}\n`));
    } catch (e) {
      process.stderr.write(`shardwise serve: the demo run could not start (${(e as Error).message}); the dashboard works without it\n`);
    }
  }
  // the page opens on the demo's view (the router keeps the token and goes to `view`)
  const view = demo ? `&view=${encodeURIComponent(`/run/${demo.runId}`)}` : '';
  process.stdout.write(`shardwise serve: open ${server.url}${view}\n`);

  await stopped;
  process.stderr.write('shardwise serve: stopping live runs\n');
  await service.close();
  await demo?.ended;
  await server.close();
  return 0;
}
