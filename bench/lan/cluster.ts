// Shardwise on a namespaced LAN (harness.ts): a real `shardwise agent` on every machine but m0,
// paired with the controller on m0 through the ordinary pairing path (`shardwise pair ADDR
// --code`), and `shardwise` commands run on m0 with ranks placed by `--placement` (rank 0 on
// m0: it hosts the rendezvous). Used by tests/lan and bench/lan*.ts alike.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
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
  /** stops the agents (the LAN stays) */
  stop(): Promise<void>;
}

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

async function startAgent(lan: Lan, m: LanMachine) {
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
      temp('agent'),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const code = (await waitFor(child, () => out, /pairing code: ([0-9A-Z]{5}-[0-9A-Z]{5})/, 30_000))[1]!;
  await waitFor(child, () => out, /listening on /, 30_000);
  return { child, code, address: `${m.ip}:${AGENT_PORT}` };
}

/** Starts an agent on every machine but m0 and pairs the controller on m0 with each. */
export async function startCluster(lan: Lan): Promise<LanCluster> {
  const home = temp('controller');
  const m0 = lan.machines[0]!;
  const shardwise: LanCluster['shardwise'] = (args, opts = {}) => {
    const [cmd, ...pre] = lan.exec(m0);
    const r = spawnSync(cmd!, [...pre, process.execPath, SHARDWISE_BIN, ...args], {
      encoding: 'utf8',
      timeout: opts.timeoutMs ?? 300_000,
      maxBuffer: 64 << 20,
      env: { ...process.env, SHARDWISE_HOME: home, SHARDWISE_DEBUG: '', ...opts.env },
    });
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  };
  const agents = await Promise.all(lan.machines.slice(1).map((m) => startAgent(lan, m)));
  const stop = async () => {
    await Promise.all(
      agents.map(
        ({ child }) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
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
    stop,
  };
}
