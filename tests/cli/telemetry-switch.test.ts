// `"telemetry": {"spans": false}` in a train config: the ranks record no compute/comm spans
// (what npm run bench:telemetry measures against the default), and train the same numbers.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, type CliResult, jsonLines, shardwise, stepLosses, tempDir } from './helpers.js';

/** `shardwise` without blocking, so the two runs overlap */
function run(args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const DDP = [
  'train',
  '--preset',
  'tiny',
  '--strategy',
  'ddp',
  '--world',
  '2',
  '--steps',
  '3',
  '--batch-size',
  '8',
  '--seed',
  '5',
  '--eval-interval',
  '0',
  '--checkpoint-interval',
  '0',
  '--json',
];
const spanLines = (dir: string) =>
  existsSync(path.join(dir, 'spans.jsonl'))
    ? readFileSync(path.join(dir, 'spans.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l.trim()).length
    : 0;

describe('telemetry.spans switch', () => {
  it('spans off: no span written, no overlap_pct, the same 3 DDP losses as with spans on', async () => {
    const dir = tempDir('spans-switch');
    const off = path.join(dir, 'off.json');
    writeFileSync(off, JSON.stringify({ telemetry: { spans: false } }));
    const [a, b] = await Promise.all([
      run([...DDP, '--out', path.join(dir, 'on')]),
      run([...DDP, '--config', off, '--out', path.join(dir, 'off')]),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    expect(spanLines(path.join(dir, 'on'))).toBeGreaterThan(0);
    expect(spanLines(path.join(dir, 'off'))).toBe(0);
    expect(jsonLines(a.stdout).at(-1)).toHaveProperty('overlap_pct');
    expect(jsonLines(b.stdout).at(-1)).not.toHaveProperty('overlap_pct');
    expect(stepLosses(b.stdout)).toEqual(stepLosses(a.stdout));
    expect(stepLosses(a.stdout)).toHaveLength(3);
  });

  it('pipeline runs keep their spans (the bubble is measured from them): refused naming the field', () => {
    const dir = tempDir('spans-switch-pp');
    const off = path.join(dir, 'off.json');
    writeFileSync(off, JSON.stringify({ telemetry: { spans: false } }));
    const r = shardwise(['train', '--strategy', 'pp', '--pp', '2', '--config', off, '--out', path.join(dir, 'pp')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/telemetry\.spans false does not apply to --strategy pp/);
  });
});
