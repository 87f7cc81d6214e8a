// npm run bench:reshard — resume in any layout, the whole matrix: a run of each of the 8 layouts
// (single, ddp 2, zero1 2, zero3 2, zero2+offload 2, tp 2, pp 2 1f1b m4, 3d 2x2x2) checkpointed
// at step 2 and resumed in each of the 7 others (bench/reshard/pair.ts). Per pair: the largest
// relative difference of the losses after the resume against the uninterrupted source (fp32's
// bound: 1e-5), whether AdamW's moments loaded in the new layout and gathered straight back equal
// the source checkpoint's bit for bit, their largest absolute difference, and the resume's
// seconds. Prints one JSON object.
// BENCH_SOURCES / BENCH_TARGETS: comma lists of layout names (LAYOUT_NAMES) to limit the matrix;
// BENCH_PRECISION=bf16 runs the sources in bf16 (losses then within the mixed-precision bound,
// the moments still exact: checkpoints keep the fp32 master); BENCH_JOBS: runs at a time (2).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  isLayoutName,
  LAYOUTS,
  type SourceRun,
  LAYOUT_NAMES,
  type LayoutName,
  limited,
  MODEL,
  type PairResult,
  RESUME_AT,
  resumePair,
  STEPS,
  trainSource,
} from './reshard/pair.js';

function layouts(env: string | undefined, what: string): LayoutName[] {
  if (!env) return [...LAYOUT_NAMES];
  const names = env.split(',').map((s) => s.trim());
  const bad = names.filter((n) => !isLayoutName(n));
  if (bad.length) throw new Error(`${what}: unknown layout ${bad.join(', ')}; choose among ${LAYOUT_NAMES.join(', ')}`);
  return names as LayoutName[];
}

const sources = layouts(process.env.BENCH_SOURCES, 'BENCH_SOURCES');
const targets = layouts(process.env.BENCH_TARGETS, 'BENCH_TARGETS');
const precision = process.env.BENCH_PRECISION === 'bf16' ? 'bf16' : 'fp32';
const jobs = Math.max(1, Number(process.env.BENCH_JOBS ?? 2));
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-reshard-'));
const t0 = performance.now();
try {
  // 8-rank runs alone, after the others: 8 ranks beside another run on a few cores slow the rendezvous
  const wide = (l: LayoutName) => LAYOUTS[l].world > 2;
  const inTurn = async <T>(tasks: { wide: boolean; run: () => Promise<T> }[]): Promise<T[]> => [
    ...(await limited(
      jobs,
      tasks.filter((t) => !t.wide).map((t) => t.run),
    )),
    ...(await limited(
      1,
      tasks.filter((t) => t.wide).map((t) => t.run),
    )),
  ];
  type Failed = { source: string; target?: string; error: string };
  const trained = await inTurn(
    sources.map((s) => ({
      wide: wide(s),
      run: () => trainSource(root, s, precision).catch((e: Error): Failed => ({ source: s, error: e.message })),
    })),
  );
  const src = trained.filter((s): s is SourceRun => !('error' in s));
  const pairs = src.flatMap((s) => targets.filter((t) => t !== s.layout).map((t) => ({ s, t })));
  const results: (PairResult | Failed)[] = [
    ...trained.filter((s): s is Failed => 'error' in s),
    ...(await inTurn(
      pairs.map(({ s, t }) => ({
        wide: wide(s.layout) || wide(t),
        run: () => resumePair(root, s, t).catch((e: Error): Failed => ({ source: s.layout, target: t, error: e.message })),
      })),
    )),
  ];
  const ok = results.filter((r): r is PairResult => !('error' in r));
  const row = (r: PairResult | Failed) =>
    'error' in r
      ? r
      : {
          pair: `${r.source} -> ${r.target}`,
          max_rel_loss_diff: r.maxRelLossDiff,
          moments_exact: r.momentsExact,
          moments_max_abs_diff: r.momentsMaxAbsDiff,
          params_exact: r.paramsExact,
          tensors: r.tensors,
          ...(r.differing.length ? { differing: r.differing } : {}),
          notes: r.notes,
          seconds: Number(r.seconds.toFixed(1)),
        };
  const out = {
    bench: 'reshard',
    precision,
    model: MODEL,
    batch_size: 8,
    steps: STEPS,
    resume_at: RESUME_AT,
    sources: src.map((s) => ({ layout: s.layout, seconds: Number(s.seconds.toFixed(1)) })),
    pairs: results.map(row),
    summary: {
      pairs: results.length,
      failed: results.length - ok.length,
      moments_exact: ok.filter((r) => r.momentsExact).length,
      params_exact: ok.filter((r) => r.paramsExact).length,
      max_rel_loss_diff: Math.max(0, ...ok.map((r) => r.maxRelLossDiff)),
      ...(precision === 'fp32' ? { within_1e5: ok.filter((r) => r.maxRelLossDiff < 1e-5).length } : {}),
      seconds: Number(((performance.now() - t0) / 1000).toFixed(1)),
    },
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
