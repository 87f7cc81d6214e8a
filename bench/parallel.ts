// npm run bench:parallel — each available strategy at world 2 and 4 on this
// machine, measured in one run so the ratios are meaningful: step time, tokens/s, peak device
// bytes per rank by category, bytes moved per step, overlap percentage. Prints one JSON object.
// Tensor parallelism runs the tiny preset with 4 heads (tp 4 splits whole heads), beside a
// single-device run of that model. BENCH_ONLY=tp (a comma list of strategy names) runs a subset.
// Precision: every case in fp32, bf16 and fp16 (every strategy trains at 16 bits, offload
// included): each row names its precision. BENCH_PRECISIONS=fp32 (a comma list) runs a subset. BENCH_CASES=tp@2,pp-1f1b-m4 (a
// comma list of case names, as the rows' `strategy`, @world for one world) runs those cases only.
// Each row also carries the model-state bytes per rank that the launch form and the memory charts
// predict (common/model-state.ts, padding included) and whether they equal the measured peaks:
// exactly for tp, pp and 3d; the data-parallel family's Ψ formula within the slots' padding.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { predictModelStateBytes, vocabFromParams } from '../common/model-state.js';
import type { Precision } from '../common/precision.js';
import { strategyOf } from '../common/strategies.js';
import { mean } from '../common/stats.js';
import { TrainRunError, trainJson } from './run-and-read.js';
import { PRESETS } from '../workers/protocol/presets.js';

const steps = Number(process.env.BENCH_STEPS ?? 12);
// BENCH_PRESET=small measures a model whose compute outweighs the per-collective round trip
// (on a real GPU the tiny preset is latency-bound); the same cases and baselines, another preset
const preset = process.env.BENCH_PRESET ?? 'tiny';
const cases: [string, number, string[]][] = [
  ['single', 1, []],
  ['dp', 2, []],
  ['ddp', 2, []],
  ['zero1', 2, []],
  ['zero2', 2, []],
  ['zero3', 2, []],
  ['zero1+offload', 2, ['--offload-optimizer', 'cpu']],
  ['zero2+offload', 2, ['--offload-optimizer', 'cpu']],
  ['dp', 4, []],
  ['ddp', 4, []],
  ['zero1', 4, []],
  ['zero2', 4, []],
  ['zero3', 4, []],
  ['single/4heads', 1, ['--config', 'HEADS4']],
  ['tp', 2, ['--config', 'HEADS4']],
  ['tp', 4, ['--config', 'HEADS4']],
];
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-parallel-'));
const heads4 = path.join(root, 'heads4.json');
// BENCH_MODEL='{"n_layer":8,"n_head":8,"d_model":512}' (model sizes over the preset's) and
// BENCH_ARGS='--batch-size 16' (more train flags) size every case alike, baselines included
const base: { n_layer?: number; n_head?: number; d_model?: number } = JSON.parse(process.env.BENCH_MODEL ?? '{}');
const benchArgs = process.env.BENCH_ARGS?.split(' ').filter(Boolean) ?? [];
const plain = path.join(root, 'base.json');
writeFileSync(plain, JSON.stringify({ model: base }));
writeFileSync(heads4, JSON.stringify({ model: { ...base, n_head: base.n_head !== undefined && base.n_head % 4 === 0 ? base.n_head : 4 } }));
// pipeline cases: the tiny preset with 4 blocks (pp 4 needs a block per stage), beside its own
// single-device baseline; bubble measured from the stages' spans next to (p-1)/(m+p-1)
const deep = path.join(root, 'tiny-4-layers.json');
writeFileSync(deep, JSON.stringify({ model: { ...base, n_layer: Math.max(base.n_layer ?? 0, 4) } }));
cases.push(['single/4layers', 1, ['--config', 'DEEP']]);
for (const p of [2, 4])
  for (const m of [1, 4, 8])
    for (const schedule of ['gpipe', '1f1b'])
      cases.push([
        `pp-${schedule}-m${m}`,
        p,
        ['--config', 'DEEP', '--pp', String(p), '--micro-batches', String(m), '--schedule', schedule],
      ]);
// 3D: D=2 x T=2 x P=2 (8 ranks) on the 4-layer, 4-head tiny model, beside its own baseline
const deep4 = path.join(root, 'tiny-4-layers-4-heads.json');
writeFileSync(
  deep4,
  JSON.stringify({
    model: {
      ...base,
      n_layer: Math.max(base.n_layer ?? 0, 4),
      n_head: base.n_head !== undefined && base.n_head % 4 === 0 ? base.n_head : 4,
    },
  }),
);
cases.push(['single/4layers4heads', 1, ['--config', 'DEEP4']]);
for (const schedule of ['gpipe', '1f1b'])
  cases.push([
    `3d-${schedule}-d2t2p2-m2`,
    8,
    ['--config', 'DEEP4', '--dp', '2', '--tp', '2', '--pp', '2', '--micro-batches', '2', '--schedule', schedule],
  ]);
// BENCH_ONLY=tp,pp,3d (strategy names) runs a subset, with the single-device baselines
const only = process.env.BENCH_ONLY?.split(',');
const onlyCases = process.env.BENCH_CASES?.split(',');
/** the model sizes each config file gives over the preset's (for the predicted model states) */
const modelOf = new Map<string, { n_layer?: number; n_head?: number; d_model?: number }>(
  [plain, heads4, deep, deep4].map((f) => [f, (JSON.parse(readFileSync(f, 'utf8')) as { model: object }).model]),
);

/** The model-state bytes per rank the formula predicts for a finished run (null where it has none). */
function predictedStates(
  strategy: string,
  world: number,
  precision: Precision,
  offload: boolean,
  configFile: string,
  summary: Record<string, any>,
) {
  const p = PRESETS[preset]!;
  const sizes = { n_layer: p.n_layer, d_model: p.d_model, block_size: p.block_size, ...modelOf.get(configFile) };
  const grid = summary.grid as { dp?: number; tp?: number; pp?: number } | undefined;
  // the vocabulary the run's Ψ implies (a tp rank's shard: already padded, which padding again leaves as it is)
  const vocab = vocabFromParams(sizes, strategy, grid?.tp ?? world, summary.params as number);
  const out: Record<string, { params: number; grads: number; optimizer: number }> = {};
  for (let rank = 0; rank < world; rank++) {
    const b = predictModelStateBytes({
      strategy,
      world,
      params: summary.params as number,
      rank,
      precision,
      offloadOptimizer: offload,
      ...(vocab !== null ? { model: { ...sizes, vocab_size: vocab } } : {}),
      ...(grid ?? {}),
    });
    if (!b) return null;
    out[String(rank)] = b;
  }
  return out;
}
const precisions = (process.env.BENCH_PRECISIONS ?? 'fp32,bf16,fp16').split(',');
const results = [];
for (const [name, world, rawExtra, precision] of cases.flatMap(([n, w, e]) => precisions.map((p) => [n, w, e, p] as const))) {
  const strategy = name.split(/[+/-]/)[0]!;
  if (only && !only.includes(strategy) && !strategyOf(strategy)?.oneRank) continue; // the one-rank baseline always runs
  if (onlyCases && !onlyCases.includes(name) && !onlyCases.includes(`${name}@${world}`)) continue;
  const withBase = rawExtra.includes('--config') ? rawExtra : ['--config', plain, ...rawExtra];
  const extra = [...benchArgs, ...withBase].map((a) => (a === 'HEADS4' ? heads4 : a === 'DEEP' ? deep : a === 'DEEP4' ? deep4 : a));
  const out = path.join(root, `${name.replace('/', '-')}-${world}-${precision}`);
  const args = [
    '--preset',
    preset,
    '--strategy',
    strategy,
    '--world',
    String(world),
    '--steps',
    String(steps),
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--precision',
    precision,
    '--out',
    out,
    ...extra,
  ];
  const r = await trainJson(`${name} x${world} ${precision}`, args).catch((e: unknown) => {
    if (e instanceof TrainRunError) return e;
    throw e;
  });
  if (r instanceof TrainRunError) {
    results.push({ strategy: name, world, precision, error: r.stderrTail.split('\n').at(-1) });
    continue;
  }
  const stepLines = r.steps.slice(2); // skip warm-up
  const stepMs = mean(stepLines.map((l) => l.step_ms as number));
  const summary = r.summary;
  const configFile = extra[extra.lastIndexOf('--config') + 1]!; // the case's own, after BENCH_ARGS
  const predicted = predictedStates(strategy, world, precision as Precision, name.includes('+offload'), configFile, summary);
  const states = (b: Record<string, number>) => ({ params: b.params ?? 0, grads: b.grads ?? 0, optimizer: b.optimizer ?? 0 });
  results.push({
    strategy: name,
    world,
    precision,
    ...(extra.includes(deep)
      ? { model: `${preset}, n_layer 4` }
      : extra.includes(deep4)
        ? { model: `${preset}, n_layer 4, n_head 4` }
        : preset !== 'tiny'
          ? { model: preset }
          : {}),
    ...(summary.grid !== undefined ? { grid: summary.grid } : {}),
    step_ms: stepMs,
    tokens_per_s: mean(stepLines.map((l) => l.tokens_per_s as number)),
    peak_bytes: summary.peak_bytes,
    bytes_moved_per_step: summary.bytes_moved_per_step ?? { '0': 0 },
    ...(predicted
      ? {
          predicted_model_states: predicted,
          predicted_equals_measured: Object.entries(predicted).every(
            ([r, b]) => JSON.stringify(states(summary.peak_bytes[r])) === JSON.stringify(b),
          ),
        }
      : {}),
    ...(summary.overlap_pct !== undefined ? { overlap_pct: summary.overlap_pct } : {}),
    ...(summary.buckets !== undefined ? { buckets: summary.buckets } : {}),
    ...(summary.skipped_steps !== undefined ? { loss_scale: summary.loss_scale, skipped_steps: summary.skipped_steps } : {}),
    ...(summary.bubble !== undefined
      ? {
          bubble: summary.bubble,
          p2p_bytes_per_step: summary.p2p_bytes_per_step,
          embedding_allreduce_bytes_per_step: summary.embedding_allreduce_bytes_per_step,
        }
      : {}),
  });
}
rmSync(root, { recursive: true, force: true });
process.stdout.write(`${JSON.stringify({ preset, model: base, args: benchArgs, steps, results }, null, 2)}\n`);
