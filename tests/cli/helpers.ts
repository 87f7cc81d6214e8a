// Run the built `shardwise` command as a user would (npm test builds dist/ first).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
export const BIN = path.join(ROOT, 'bin/shardwise.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function shardwise(args: string[], opts: { timeoutMs?: number; cwd?: string } = {}): CliResult {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    timeout: opts.timeoutMs ?? 600_000,
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, SHARDWISE_DEBUG: '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** `shardwise ARGS --json` in the background (runs side by side); its last JSON line, or a rejection naming `name` with stderr. */
export function lastJsonLine(name: string, args: string[]): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(jsonLines(out).at(-1)!) : reject(new Error(`${name}: exit ${code}: ${err}`))));
  });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `shardwise-${prefix}-`));
}

export function jsonLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export function stepLosses(stdout: string): number[] {
  return jsonLines(stdout)
    .filter((m) => m.type === 'step')
    .map((m) => m.loss as number);
}
