// Shardwise on a namespaced LAN (harness.ts): a real `shardwise agent` on every machine but m0,
// paired with the controller on m0 through the ordinary pairing path (`shardwise pair ADDR
// --code`), and `shardwise` commands run on m0 with ranks placed by `--placement` (rank 0 on
// m0: it hosts the rendezvous). Used by tests/lan and bench/lan*.ts alike. An agent can be
// killed -9 with every process under it (a machine lost) and started again at its address with
// its state folder (its pairing kept): the elastic runs' tests and bench do both.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Lan, LanMachine } from './harness.js';

/** The repository root (from bench/lan or dist/bench/lan alike): where bin/shardwise.js is. */
function repoRoot(): string {
  let dir = path.dirname(new URL(import.meta.url).pathname);
  while (!existsSync(path.join(dir, 'bin/shardwise.js'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('LAN cluster: bin/shardwise.js not found above this file');
    dir = up;
  }
  return dir;
}
export const SHARDWISE_ROOT = repoRoot();
export const SHARDWISE_BIN = path.join(SHARDWISE_ROOT, 'bin/shardwise.js');
export const AGENT_PORT = 7341;

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface LanCluster {
  lan: Lan;
  /** agent address of each machine but m0 (HOST:PORT), in machine order */
  agents: string[];
  /** `--placement` for `ranksPerMachine[i]` ranks on machine i (rank 0 first, on m0) */
  placement(ranksPerMachine: number[]): string;
  /** a `shardwise` command on m0, as the paired controller */
  shardwise(args: string[], opts?: { env?: Record<string, string>; timeoutMs?: number }): CommandResult;
  /** the same, left running (stdout and stderr piped) */
  spawnShardwise(args: string[], opts?: { env?: Record<string, string> }): ChildProcess;
  /** kill -9 the agent on machine `i` (1 or more) and every process under it (its ranks): the machine is lost; the pids killed */
  killAgent(i: number): Promise<number[]>;
  /** start the agent on machine `i` again, at its address with its state folder (still paired); resolves once it listens */
  restartAgent(i: number): Promise<void>;
  /** the agent on machine `i` and every process under it (its worker, its ranks) */
  agentTree(i: number): number[];
  /** stops the agents (the LAN stays) */
  stop(): Promise<void>;
}

/** `pid` and every process under it (from /proc's parent ids) */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${d}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** the processes in a machine's namespace */
export function machinePids(m: LanMachine): number[] {
  const r = spawnSync('ip', ['netns', 'pids', m.ns], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split(/\s+/).filter(Boolean).map(Number) : [];
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => child.once('exit', () => r()));

const temp = (prefix: string) => mkdtempSync(path.join(tmpdir(), `shardwise-lan-${prefix}-`));

/** Waits until `re` appears in what the process printed. */
function waitFor(child: ChildProcess, text: () => string, re: RegExp, ms: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const done = (f: () => void) => {
      clearTimeout(timer);
      child.stdout!.off('data', check);
      child.stderr!.off('data', check);
      child.off('exit', onExit);
      f();
    };
    const check = () => {
      const m = text().match(re);
      if (m) done(() => resolve(m));
    };
    const onExit = () => done(() => reject(new Error(`the agent exited before printing ${re}: ${text()}`)));
    const timer = setTimeout(() => done(() => reject(new Error(`the agent did not print ${re} within ${ms} ms: ${text()}`))), ms);
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.on('exit', onExit);
    check();
  });
}

async function startAgent(lan: Lan, m: LanMachine, stateDir = temp('agent')) {
  const child = spawn(
    lan.exec(m)[0]!,
    [
      ...lan.exec(m).slice(1),
      process.execPath,
      SHARDWISE_BIN,
      'agent',
      '--host',
      '0.0.0.0',
      '--port',
      String(AGENT_PORT),
      '--name',
      m.name,
      '--mdns',
      'off',
      '--state-dir',
      stateDir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const code = (await waitFor(child, () => out, /pairing code: ([0-9A-Z]{5}-[0-9A-Z]{5})/, 30_000))[1]!;
  await waitFor(child, () => out, /listening on /, 30_000);
  return { child, code, stateDir, address: `${m.ip}:${AGENT_PORT}` };
}

/** Starts an agent on every machine but m0 and pairs the controller on m0 with each. */
export async function startCluster(lan: Lan): Promise<LanCluster> {
  const home = temp('controller');
  const m0 = lan.machines[0]!;
  const envOf = (more?: Record<string, string>) => ({ ...process.env, SHARDWISE_HOME: home, SHARDWISE_DEBUG: '', ...more });
  const shardwise: LanCluster['shardwise'] = (args, o = {}) => {
    const [cmd, ...pre] = lan.exec(m0);
    const r = spawnSync(cmd!, [...pre, process.execPath, SHARDWISE_BIN, ...args], {
      encoding: 'utf8',
      timeout: o.timeoutMs ?? 300_000,
      maxBuffer: 64 << 20,
      env: envOf(o.env),
    });
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
  const spawnShardwise: LanCluster['spawnShardwise'] = (args, o = {}) => {
    const [cmd, ...pre] = lan.exec(m0);
    return spawn(cmd!, [...pre, process.execPath, SHARDWISE_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: envOf(o.env) });
  };
  const agents = await Promise.all(lan.machines.slice(1).map((m) => startAgent(lan, m)));
  const agentAt = (i: number) => {
    const a = agents[i - 1];
    if (!a) throw new Error(`LAN cluster: no agent on machine ${i} (agents run on m1 to m${agents.length})`);
    return a;
  };
  const stop = async () => {
    await Promise.all(
      agents.map(({ child }) => {
        child.kill('SIGTERM');
        return exited(child);
      }),
    );
  };
  try {
    for (const a of agents) {
      const r = shardwise(['pair', a.address, '--code', a.code], { timeoutMs: 60_000 });
      if (r.code !== 0) throw new Error(`LAN cluster: pairing with the agent at ${a.address} failed: ${r.stderr.trim()}`);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const addresses = agents.map((a) => a.address);
  return {
    lan,
    agents: addresses,
    placement: (per) => {
      if (per.length > lan.machines.length || !(per[0]! >= 1))
        throw new Error(`placement ${per}: rank 0 goes on m0, at most one count per machine`);
      return per.flatMap((n, i) => Array<string>(n).fill(i === 0 ? 'local' : addresses[i - 1]!)).join(',');
    },
    shardwise,
    spawnShardwise,
    agentTree: (i) => {
      const { child } = agentAt(i);
      return child.exitCode === null && child.signalCode === null ? processTree(child.pid!) : [];
    },
    async killAgent(i) {
      const a = agentAt(i);
      // the whole tree at once: the agent, its worker, its ranks (no parent left to clean up after them)
      const pids = processTree(a.child.pid!);
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await exited(a.child);
      return pids;
    },
    async restartAgent(i) {
      const a = agentAt(i);
      if (a.child.exitCode === null && a.child.signalCode === null) throw new Error(`LAN cluster: the agent on m${i} is still running`);
      agents[i - 1] = await startAgent(lan, lan.machines[i]!, a.stateDir);
    },
    stop,
  };
}
