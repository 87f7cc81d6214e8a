// npm run bench:compression [-- --steps N --preset NAME --half-steps N --half-preset NAME --rank R --start-iter N --seed S]
// The long acceptance runs for gradient compression, which do not fit the test suite:
//   - the fp16 and bf16 hooks against uncompressed DDP on `--half-preset` (tiny) for
//     `--half-steps` (200): bytes moved per step halve, final loss within 2%;
//   - PowerSGD rank `--rank` (4) against uncompressed DDP on `--preset` (small) for `--steps`
//     (300): bytes moved per step at most a tenth, final loss within 5%.
// Every run is DDP at world 2 on this machine with the same seed and batches; the compressed run
// is compared with the uncompressed one of the same preset and steps. Prints one JSON object:
// {"world":2,"results":[{"case":"fp16","preset":"tiny","steps":200,...,"bytes_ratio":r,"loss_diff":d,"pass":true},...]}.
// PowerSGD's first `--start-iter` steps (10, the hook's default; PyTorch's PowerSGDState defaults to 1,000 and suggests ~10% of the steps) all-reduce uncompressed, so its
// row also gives the ratio of the compressed steps alone (those steps move the baseline's bytes).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { mean } from '../common/stats.js';
import { trainJson } from './run-and-read.js';

const WORLD = 2;

const { values: v } = parseArgs({
  options: {
    steps: { type: 'string', default: '300' },
    preset: { type: 'string', default: 'small' },
    'half-steps': { type: 'string', default: '200' },
    'half-preset': { type: 'string', default: 'tiny' },
    rank: { type: 'string', default: '4' },
    'start-iter': { type: 'string', default: '10' },
    seed: { type: 'string', default: '5' },
  },
  strict: true,
});
const int = (name: string, text: string, min: number) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${text}"`);
  return n;
};
const steps = int('steps', v.steps!, 1);
const halfSteps = int('half-steps', v['half-steps']!, 1);
const rank = int('rank', v.rank!, 1);
const startIter = int('start-iter', v['start-iter']!, 0);
const seed = int('seed', v.seed!, 0);

interface Run {
  final_loss: number;
  /** mean over the ranks */
  bytes_moved_per_step: number;
  step_ms: number;
  compression?: { compression_ratio: number; error_feedback_norm?: number };
}

const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-compression-'));

async function train(name: string, preset: string, n: number, extra: string[]): Promise<Run> {
  const args = ['--preset', preset, '--strategy', 'ddp', '--world', String(WORLD), '--steps', String(n), '--seed', String(seed)];
  args.push('--eval-interval', '0', '--checkpoint-interval', '0', '--out', path.join(root, name), ...extra);
  const { steps: stepLines, summary } = await trainJson(name, args);
  const g = (summary.grad_compression as Record<string, { compression_ratio: number; error_feedback_norm?: number }> | undefined)?.['0'];
  return {
    final_loss: summary.final_loss,
    bytes_moved_per_step: mean(Object.values(summary.bytes_moved_per_step as Record<string, number>)),
    step_ms: mean(stepLines.map((l) => l.step_ms as number)),
    ...(g
      ? {
          compression: {
            compression_ratio: g.compression_ratio,
            ...(g.error_feedback_norm !== undefined ? { error_feedback_norm: g.error_feedback_norm } : {}),
          },
        }
      : {}),
  };
}

/** One compressed run against its uncompressed baseline, with the targets above. */
function row(
  c: string,
  preset: string,
  n: number,
  run: Run,
  base: Run,
  target: { bytes_ratio_max: number; loss_diff_max: number },
  more = {},
) {
  const bytesRatio = run.bytes_moved_per_step / base.bytes_moved_per_step;
  const lossDiff = Math.abs(run.final_loss - base.final_loss) / base.final_loss;
  return {
    case: c,
    preset,
    steps: n,
    world: WORLD,
    final_loss: run.final_loss,
    baseline_final_loss: base.final_loss,
    /** |loss - baseline| / baseline after the last step */
    loss_diff: lossDiff,
    bytes_moved_per_step: run.bytes_moved_per_step,
    baseline_bytes_moved_per_step: base.bytes_moved_per_step,
    bytes_ratio: bytesRatio,
    step_ms: run.step_ms,
    baseline_step_ms: base.step_ms,
    ...run.compression,
    ...more,
    target,
    pass: bytesRatio <= target.bytes_ratio_max && lossDiff <= target.loss_diff_max,
  };
}

const results = [];
try {
  const halfPreset = v['half-preset']!;
  const halfBase = await train('half-none', halfPreset, halfSteps, []);
  for (const hook of ['fp16', 'bf16']) {
    const run = await train(`half-${hook}`, halfPreset, halfSteps, ['--grad-compression', hook]);
    // "halve": the payload exactly halves, frame headers keep the wire just above
    results.push(row(hook, halfPreset, halfSteps, run, halfBase, { bytes_ratio_max: 0.51, loss_diff_max: 0.02 }));
  }
  const preset = v.preset!;
  const base = await train('psgd-none', preset, steps, []);
  const run = await train(`psgd-${rank}`, preset, steps, [
    '--grad-compression',
    `powersgd:${rank}`,
    '--powersgd-start-iter',
    String(startIter),
  ]);
  const compressed = Math.max(1, steps - Math.min(steps, startIter));
  // the uncompressed first steps moved the baseline's bytes; what is left is the compressed steps'
  const compressedSteps = (run.bytes_moved_per_step * steps - base.bytes_moved_per_step * Math.min(steps, startIter)) / compressed;
  results.push(
    row(
      `powersgd:${rank}`,
      preset,
      steps,
      run,
      base,
      { bytes_ratio_max: 0.1, loss_diff_max: 0.05 },
      {
        start_iter: startIter,
        bytes_ratio_compressed_steps: steps > startIter ? compressedSteps / base.bytes_moved_per_step : null,
      },
    ),
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify({ world: WORLD, seed, results }) + '\n');
