// Entry of `shardwise agent [--port P] [--host H] [--name NAME] [--state-dir DIR] [--mdns on|off]`.
// Prints where it listens and its pairing code (again whenever the code changes); logs one
// line per refused or closed connection on stderr. Stops on SIGINT/SIGTERM.
import { parseArgs } from 'node:util';
import { AGENT_DEFAULT_PORT } from '../protocol/agent.js';
import { isLoopback, startAgent } from './server.js';
import { defaultStateDir } from './state.js';

function fail(msg: string): never {
  process.stderr.write(`shardwise agent: ${msg}\n`);
  process.exit(2);
}

let v: Record<string, string | boolean | undefined>;
try {
  v = parseArgs({
    args: process.argv.slice(2),
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      name: { type: 'string' },
      'state-dir': { type: 'string' },
      mdns: { type: 'string' },
    },
    strict: true,
  }).values;
} catch (e) {
  fail(`${(e as Error).message}; usage: shardwise agent [--port P] [--host H] [--name NAME] [--state-dir DIR] [--mdns on|off]`);
}
const port = v.port === undefined ? AGENT_DEFAULT_PORT : Number(v.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be an integer from 0 to 65535, got "${v.port}"`);
if (v.mdns !== undefined && v.mdns !== 'on' && v.mdns !== 'off') fail(`--mdns takes on or off, got "${v.mdns}"`);
const host = (v.host as string | undefined) ?? '127.0.0.1';
const out = (s: string) => process.stdout.write(`${s}\n`);

try {
  const agent = await startAgent({
    host,
    port,
    stateDir: (v['state-dir'] as string | undefined) ?? defaultStateDir(),
    name: v.name as string | undefined,
    mdns: v.mdns === undefined ? undefined : v.mdns === 'on',
    log: (line) => process.stderr.write(`shardwise agent: ${line}\n`),
    onCode: (code, why) => out(why === 'start' ? `pairing code: ${code}` : `pairing code: ${code} (${why})`),
  });
  out(`shardwise agent ${agent.agentId.slice(0, 8)} listening on ${host}:${agent.port}`);
  if (isLoopback(host)) out("only this machine can reach it; pass --host 0.0.0.0 (or this machine's LAN address) to serve the LAN");
  const stop = () => agent.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
} catch (e) {
  const err = e as NodeJS.ErrnoException;
  if (err.code === 'EADDRINUSE') fail(`port ${port} on ${host} is in use; pick another with --port`);
  fail(err.message);
}
