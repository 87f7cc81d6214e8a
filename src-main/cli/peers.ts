// The cluster from the command line:
//   shardwise agent [...]                    runs this machine's agent (workers/agent/main.ts)
//   shardwise peers [--wait S] [--json]      agents announced on the LAN, and which are paired
//   shardwise pair HOST:PORT --code CODE     pair with the code the agent shows
//   shardwise peer HOST:PORT [--json]        a paired agent's machine, devices and clock offset
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AgentError, connectAgent, pairAgent } from '../cluster/agent-client.js';
import { ControllerIdentity } from '../cluster/controller-identity.js';
import { discoverAgents } from '../cluster/discovery.js';
import { CliError } from './errors.js';

const AGENT_ENTRY = fileURLToPath(new URL('../../workers/agent/main.js', import.meta.url));

export function agentCommand(argv: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [AGENT_ENTRY, ...argv], { stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('exit', (code, sig) => resolve(code ?? (sig ? 0 : 1)));
  });
}

function args<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O, usage: string) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new CliError(`${(e as Error).message}; usage: ${usage}`);
  }
}

const asCli = (e: unknown) => (e instanceof AgentError ? new CliError(e.message) : e);

export async function peersCommand(argv: string[]): Promise<number> {
  const { values: v } = args(argv, { wait: { type: 'string' }, json: { type: 'boolean' } }, 'shardwise peers [--wait SECONDS] [--json]');
  const wait = v.wait === undefined ? 3 : Number(v.wait);
  if (!Number.isFinite(wait) || wait <= 0 || wait > 600) throw new CliError(`--wait takes seconds between 0 and 600, got "${v.wait}"`);
  const me = new ControllerIdentity();
  const d = discoverAgents();
  await new Promise((r) => setTimeout(r, wait * 1000));
  await d.stop();
  const agents = d.agents().map((a) => ({ ...a, paired: me.agent(a.agentId) !== null }));
  if (v.json) process.stdout.write(`${JSON.stringify({ agents })}\n`);
  else if (!agents.length)
    process.stdout.write(`no agents announced themselves within ${wait} s (start one with: shardwise agent --host 0.0.0.0)\n`);
  else
    for (const a of agents)
      process.stdout.write(`${a.name}  ${a.address}  ${a.paired ? 'paired' : 'not paired (shardwise pair ADDRESS --code CODE)'}\n`);
  return 0;
}

export async function pairCommand(argv: string[]): Promise<number> {
  const usage = 'shardwise pair HOST:PORT --code CODE [--json]';
  const { values: v, positionals } = args(argv, { code: { type: 'string' }, json: { type: 'boolean' } }, usage);
  if (positionals.length !== 1 || !v.code) throw new CliError(`give the agent's address and the code it shows; usage: ${usage}`);
  const me = new ControllerIdentity();
  try {
    const s = await pairAgent(positionals[0]!, v.code as string, me);
    s.close();
    if (v.json) process.stdout.write(`${JSON.stringify({ paired: true, agentId: s.agentId, agentName: s.agentName })}\n`);
    else process.stdout.write(`paired with agent "${s.agentName}" (${s.agentId.slice(0, 8)}) at ${positionals[0]}\n`);
    return 0;
  } catch (e) {
    throw asCli(e);
  }
}

export async function peerCommand(argv: string[]): Promise<number> {
  const usage = 'shardwise peer HOST:PORT [--json]';
  const { values: v, positionals } = args(argv, { json: { type: 'boolean' } }, usage);
  if (positionals.length !== 1) throw new CliError(`give the agent's address; usage: ${usage}`);
  const me = new ControllerIdentity();
  try {
    const s = await connectAgent(positionals[0]!, me);
    const machine = await s.request('machine');
    const devices = await s.request('devices');
    // the sample with the shortest round trip bounds the offset best (NTP's filter)
    const samples = [];
    for (let i = 0; i < 8; i++) samples.push(await s.ping());
    const best = samples.reduce((a, b) => (b.rttMs < a.rttMs ? b : a));
    s.close();
    if (v.json) process.stdout.write(`${JSON.stringify({ machine, devices, clock: best })}\n`);
    else {
      process.stdout.write(
        `${machine.agentName} (${machine.hostname}, ${machine.platform}/${machine.arch}, ${machine.cpus} CPUs, ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB)\n`,
      );
      for (const a of devices.adapters)
        process.stdout.write(`  [${a.index}] ${a.description} (${a.backend}${a.isSoftware ? ', software' : ''})\n`);
      process.stdout.write(`  clock offset ${best.offsetMs.toFixed(2)} ms (round trip ${best.rttMs.toFixed(2)} ms)\n`);
    }
    return 0;
  } catch (e) {
    throw asCli(e);
  }
}
