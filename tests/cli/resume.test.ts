import { cpSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonLines, shardwise, stepLosses, tempDir } from './helpers.js';

// `train --resume` rewinds the run folder like the API's runs.resume (src-main/launch/resume.ts):
// metrics and spans past the checkpoint are dropped, so each replayed step is in the folder once.
// tests/dist/serve-api.test.ts checks the same from the API.
const LONG = 600_000;

/** spans.jsonl as a count per "rank:step" */
function spanCounts(dir: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const l of readFileSync(path.join(dir, 'spans.jsonl'), 'utf8').split('\n')) {
    if (!l.trim()) continue;
    const s = JSON.parse(l) as { rank: number; step: number };
    counts[`${s.rank}:${s.step}`] = (counts[`${s.rank}:${s.step}`] ?? 0) + 1;
  }
  return counts;
}

describe('train --resume', () => {
  it(
    'replays the steps after the checkpoint once: metrics and spans past it are dropped first, losses are the same',
    () => {
      const root = tempDir('resume');
      const full = path.join(root, 'full');
      const args = [
        '--strategy',
        'ddp',
        '--world',
        '2',
        '--steps',
        '4',
        '--seed',
        '3',
        '--checkpoint-interval',
        '2',
        '--eval-interval',
        '0',
      ];
      const a = shardwise(['train', ...args, '--out', full, '--json']);
      expect(a.code, a.stderr).toBe(0);
      const counts = spanCounts(full);
      expect(Object.keys(counts).sort()).toEqual(['0:1', '0:2', '0:3', '0:4', '1:1', '1:2', '1:3', '1:4']);

      // the same folder, continued from step 2: steps 3 and 4 run again
      const copy = path.join(root, 'copy');
      cpSync(full, copy, { recursive: true });
      const b = shardwise(['train', '--resume', path.join(copy, 'checkpoints', 'step-000002'), '--json']);
      expect(b.code, b.stderr).toBe(0);
      const replayed = jsonLines(b.stdout).filter((m) => m.type === 'step');
      expect(replayed.map((m) => m.step)).toEqual([3, 4]);
      expect(stepLosses(b.stdout)).toEqual(stepLosses(a.stdout).slice(2));

      expect(spanCounts(copy)).toEqual(counts);
      const metrics = jsonLines(readFileSync(path.join(copy, 'metrics.jsonl'), 'utf8')).filter((m) => m.type === 'step');
      expect(metrics.map((m) => m.step)).toEqual([1, 2, 3, 4]);
      expect(JSON.parse(readFileSync(path.join(copy, 'state.json'), 'utf8'))).toMatchObject({ status: 'completed', step: 4 });
    },
    LONG,
  );
});
