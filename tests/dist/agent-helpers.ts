// A real `shardwise agent` process and controller-side CLI calls with their own state folders.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { BIN, type CliResult, tempDir } from '../cli/helpers.js';

export interface AgentProcess {
  child: ChildProcess;
  port: number;
  /** every pairing code printed so far, newest last */
  codes: string[];
  stdout: () => string;
  stderr: () => string;
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  stop(): Promise<void>;
}

export async function startAgent(args: string[], prefix: string[] = []): Promise<AgentProcess> {
  const stateDir = tempDir('agent-state');
  const [cmd, ...pre] = prefix.length ? prefix : [process.execPath];
  const child = spawn(cmd!, [...pre, ...(prefix.length ? [process.execPath] : []), BIN, 'agent', '--state-dir', stateDir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const codes: string[] = [];
  const waiters: (() => void)[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    codes.splice(0, codes.length, ...[...out.matchAll(/pairing code: ([0-9A-Z]{5}-[0-9A-Z]{5})/g)].map((m) => m[1]!));
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  const waitFor = (re: RegExp, ms = 20_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`agent did not print ${re} within ${ms} ms; stdout: ${out} stderr: ${err}`)), ms);
      const check = () => {
        const m = (out + err).match(re);
        if (m) {
          clearTimeout(t);
          resolve(m);
        } else waiters.push(check);
      };
      check();
    });
  const m = await waitFor(/listening on \S+:(\d+)/);
  return {
    child,
    port: Number(m[1]),
    codes,
    stdout: () => out,
    stderr: () => err,
    waitFor,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** A controller-side CLI call with its own SHARDWISE_HOME (its identity and paired keys). */
export function controller(home: string, args: string[], prefix: string[] = []): CliResult {
  const [cmd, ...pre] = prefix.length ? [...prefix, process.execPath] : [process.execPath];
  const r = spawnSync(cmd!, [...pre, BIN, ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, SHARDWISE_HOME: home, SHARDWISE_DEBUG: '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
