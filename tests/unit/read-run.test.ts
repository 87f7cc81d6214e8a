// The run-folder reader behind reports and "open a past run": a crashed run's torn last .jsonl
// line is skipped and named, a later line for the same step wins (a resumed run), missing
// optional files read as empty, and a folder that is not a run is refused with a hint.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRun } from '../../src-main/runs/read-run.js';

const dirs: string[] = [];
function runFolder(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-read-run-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const base = {
  'config.json': JSON.stringify({ parallel: { strategy: 'ddp', world: 2 } }),
  'state.json': JSON.stringify({
    status: 'failed',
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:10Z',
    step: 2,
    steps: 10,
  }),
};

describe('readRun', () => {
  it('skips a torn last line of metrics.jsonl and spans.jsonl and names it; keeps every whole line', () => {
    const dir = runFolder({
      ...base,
      'metrics.jsonl':
        '{"type":"step","step":1,"loss":3.1}\n{"type":"eval","step":1,"val_loss":3.0}\n{"type":"step","step":2,"loss":2.9}\n{"type":"step","st',
      'spans.jsonl': '{"rank":0,"step":1,"kind":"forward","name":"head","start":1,"end":2}\n{"rank":1,"ste',
    });
    const run = readRun(dir);
    expect(run.steps.map((s) => [s.step, s.loss])).toEqual([
      [1, 3.1],
      [2, 2.9],
    ]);
    expect(run.evals).toEqual([{ step: 1, val_loss: 3.0 }]);
    expect(run.spans).toHaveLength(1);
    expect(run.summary).toBeNull();
    expect(run.state.status).toBe('failed');
    expect(run.skipped).toEqual([
      { file: 'metrics.jsonl', line: 4, torn: true },
      { file: 'spans.jsonl', line: 2, torn: true },
    ]);
  });
  it('a later line for the same step wins (a resumed run logs it again); a bad middle line is skipped, not torn', () => {
    const dir = runFolder({
      ...base,
      'metrics.jsonl': '{"type":"step","step":1,"loss":3.1}\nnot json\n{"type":"step","step":1,"loss":3.0}\n',
    });
    const run = readRun(dir);
    expect(run.steps).toEqual([{ type: 'step', step: 1, loss: 3.0 }]);
    expect(run.skipped).toEqual([{ file: 'metrics.jsonl', line: 2, torn: false }]);
    expect(run.spans).toEqual([]);
  });
  it('refuses what is not a run folder, naming what to give instead', () => {
    expect(() => readRun(path.join(tmpdir(), 'shardwise-no-such-run'))).toThrow(
      /does not exist; give the folder a 'shardwise train --out DIR' run wrote/,
    );
    expect(() => readRun(runFolder({}))).toThrow(/is not a Shardwise run folder/);
    const bad = runFolder({ ...base, 'config.json': '{' });
    expect(() => readRun(bad)).toThrow(
      `run folder ${bad}: config.json is not valid JSON (Expected property name or '}' in JSON at position 1`,
    );
  });
});
