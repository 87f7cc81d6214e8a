// Run the built `shardwise` command as a user would (npm test builds dist/ first).
import { spawnSync } from 'node:child_process';
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
