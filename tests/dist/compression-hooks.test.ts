import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonLines, shardwise, tempDir } from '../cli/helpers.js';

// Gradient compression's acceptance, as far as the suite's time allows (DDP at world 2 against
// the uncompressed run with the same seed and batches):
//   - the bf16 hook on tiny (data-parallel.test.ts checks fp16 the same way): the bytes each rank
//     moves per step halve (the 16-bit payload; frame headers keep the wire just above half) and
//     the final loss is within 2% of uncompressed, over 30 steps;
//   - PowerSGD rank 4 on small, compressing from the first step: at most a tenth of the bytes.
// The full lengths (both hooks over 200 tiny steps, PowerSGD's loss after 300 small steps) are
// bench:compression's: measured here, the three 200-step tiny runs alone took several minutes of
// this machine and one small DDP step seconds. data-parallel.test.ts also resumes a PowerSGD run
// from a checkpoint and checks it trains bit for bit as the uninterrupted one (error feedback kept).
const STEPS = 30;
const PSGD_STEPS = 1;
const root = tempDir('compression');

interface Summary {
  final_loss: number;
  bytes_moved_per_step: Record<string, number>;
  grad_compression?: Record<string, { hook: string; compression_ratio: number; math?: string }>;
}

/** spans off: what is checked here is bytes and losses, and per-layer spans cost time */
function config(): string {
  const file = path.join(root, 'no-spans.json');
  writeFileSync(file, JSON.stringify({ telemetry: { spans: false } }));
  return file;
}

function train(name: string, extra: string[], preset = 'tiny', steps = STEPS): Summary {
  const r = shardwise([
    'train',
    '--preset',
    preset,
    '--strategy',
    'ddp',
    '--world',
    '2',
    '--steps',
    String(steps),
    '--seed',
    '5',
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--config',
    config(),
    '--out',
    path.join(root, name),
    '--json',
    ...extra,
  ]);
  expect(r.code, r.stderr).toBe(0);
  return jsonLines(r.stdout).at(-1) as unknown as Summary;
}

describe('gradient compression at world 2 (ddp)', () => {
  it(`bf16 on tiny (${STEPS} steps): each rank's bytes per step halve within 1%, the final loss within 2% of uncompressed`, () => {
    const base = train('none', []);
    const s = train('bf16', ['--grad-compression', 'bf16']);
    expect(s.grad_compression?.['0']).toMatchObject({ hook: 'bf16', compression_ratio: 2 });
    for (const r of Object.keys(base.bytes_moved_per_step)) {
      const ratio = s.bytes_moved_per_step[r]! / base.bytes_moved_per_step[r]!;
      expect(ratio, `rank ${r}: bf16's bytes per step against uncompressed`).toBeGreaterThanOrEqual(0.5);
      expect(ratio, `rank ${r}: bf16's bytes per step against uncompressed`).toBeLessThanOrEqual(0.505);
    }
    const diff = Math.abs(s.final_loss - base.final_loss) / base.final_loss;
    expect(diff, `bf16: final loss ${s.final_loss} against ${base.final_loss}`).toBeLessThan(0.02);
  }, 600_000);

  it(`PowerSGD rank 4 on small, compressing from the first step: each rank moves at most a tenth of the uncompressed bytes per step; on this software adapter its math runs on the host`, () => {
    const base = train('small-none', [], 'small', PSGD_STEPS);
    const s = train('small-powersgd', ['--grad-compression', 'powersgd:4', '--powersgd-start-iter', '0'], 'small', PSGD_STEPS);
    expect(s.grad_compression?.['0']).toMatchObject({ hook: 'powersgd', math: 'host' });
    for (const r of Object.keys(base.bytes_moved_per_step)) {
      const ratio = s.bytes_moved_per_step[r]! / base.bytes_moved_per_step[r]!;
      expect(ratio, `rank ${r}: PowerSGD's bytes per step against uncompressed`).toBeLessThanOrEqual(0.1);
    }
    expect(Number.isFinite(s.final_loss)).toBe(true);
  }, 600_000);
});
