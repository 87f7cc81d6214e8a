// Resume in another layout, the suite's subset of the matrix (the whole 8 x 7: npm run
// bench:reshard). Each pair is a real run checkpointed at step 2 in layout A and resumed from it
// in layout B (bench/reshard/pair.ts): the losses after the resume equal the uninterrupted A run's
// within 1e-5 relative (fp32; bf16 within the mixed-precision bound the equivalence tests use),
// and the state B loaded, gathered straight back to the usual layout before its first step, is
// the source checkpoint's bit for bit: AdamW's moments, its step and the weights, every tensor.
// Every kind of crossing occurs once: sharded -> replicated (zero3 2 -> ddp 2), replicated ->
// sharded (ddp 2 -> zero2+offload 2), stages -> whole (pp 2 1F1B m4 -> single), tensor-parallel
// shards -> whole and back (tp 2 -> single, single -> tp 2), a 3d 2x2x2 target (from pp 2's
// stages, micro-batches 4 -> 2), and one bf16 pair (single -> zero3 2). PowerSGD's per-rank state
// is reset with a note in another layout. Then the refusals: a grid
// rule, a layout that cannot hold the model, a setting a resume cannot change, each naming the
// flag, the folder left as it was.
import { cpSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type LayoutName,
  limited,
  MODEL,
  type PairResult,
  RESUME_AT,
  resumePair,
  type SourceRun,
  STEPS,
  trainSource,
} from '../../bench/reshard/pair.js';
import { PRESETS } from '../../workers/protocol/presets.js';
import { shardwise, tempDir } from '../cli/helpers.js';
import { mixedTolerance } from './helpers/mixed-precision.js';

const LONG = 600_000;
const FP32: [LayoutName, LayoutName, string][] = [
  ['zero3-2', 'ddp2', 'sharded -> replicated'],
  ['ddp2', 'zero2-offload-2', 'replicated -> sharded, moments to the host'],
  ['pp2-1f1b-m4', 'single', 'stages -> whole'],
  ['tp2', 'single', 'tensor-parallel shards -> whole'],
  ['single', 'tp2', 'whole -> tensor-parallel shards'],
  ['pp2-1f1b-m4', '3d-2x2x2', 'stages -> a 3d grid (dp, tp shards and stages)'],
];
/** builtin:grammar's vocabulary (27 characters) */
const BF16_TOL = mixedTolerance(STEPS, PRESETS.tiny!.lr, { ...MODEL, vocab_size: 27 }, 3, 1);

const root = tempDir('reshard');
const sources = new Map<string, SourceRun>();
const pairs = new Map<string, PairResult>();
const failures = new Map<string, string>();
/** the pair's result, or a failure saying why its run did not complete */
function result(k: string): PairResult {
  const p = pairs.get(k);
  if (!p) throw new Error(`${k}: ${failures.get(k) ?? 'not run (its source failed)'}`);
  return p;
}
const key = (a: string, b: string, precision = 'fp32') => `${a} -> ${b} ${precision}`;

/** every file of a folder with its size and modification time: a refused resume changes none */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const s = statSync(path.join(dir, f));
    if (s.isFile()) out[f] = `${s.size}:${s.mtimeMs}`;
  }
  return out;
}

describe('resume in another layout', () => {
  it(
    'trains each source uninterrupted, then resumes its step-2 checkpoint in the other layout',
    async () => {
      const fp32 = [...new Set(FP32.map(([a]) => a))];
      const runs = await limited(2, [...fp32.map((l) => () => trainSource(root, l)), () => trainSource(root, 'single', 'bf16')]);
      for (const s of runs) sources.set(`${s.layout} ${s.precision}`, s);
      // each pair on its own: one that fails is reported by its own check below, with why
      const pair =
        (a: LayoutName, b: LayoutName, precision = 'fp32') =>
        () =>
          resumePair(root, sources.get(`${a} ${precision}`)!, b).then(
            (p) => void pairs.set(key(a, b, precision), p),
            (e: Error) => void failures.set(key(a, b, precision), e.message),
          );
      await limited(2, [...FP32.filter(([, b]) => b !== '3d-2x2x2').map(([a, b]) => pair(a, b)), pair('single', 'zero3-2', 'bf16')]);
      // the 8-rank pair alone: 8 ranks beside another run on 2 cores slow the rendezvous
      for (const [a, b] of FP32.filter(([, t]) => t === '3d-2x2x2')) await pair(a, b)();
      expect(pairs.size + failures.size).toBe(FP32.length + 1);
    },
    LONG,
  );

  it.each(FP32)('%s -> %s (%s): the same losses within 1e-5, the moments loaded bit for bit', (a, b) => {
    const p = result(key(a, b));
    const what = JSON.stringify(p);
    expect(p.losses, what).toHaveLength(STEPS - RESUME_AT);
    expect(p.maxRelLossDiff, what).toBeLessThan(1e-5);
    // 2 blocks: 2 x 12 + 4 tensors, each as weights, exp_avg and exp_avg_sq
    expect(p.tensors, what).toBe(3 * 28);
    expect(p.differing, what).toEqual([]);
    expect(p.momentsExact, what).toBe(true);
    expect(p.momentsMaxAbsDiff, what).toBe(0);
    expect(p.paramsExact, what).toBe(true);
  });

  it('bf16: single -> zero3 2 within the mixed-precision bound, the fp32 master and moments loaded bit for bit', () => {
    const p = result(key('single', 'zero3-2', 'bf16'));
    const what = JSON.stringify(p);
    expect(p.losses, what).toHaveLength(STEPS - RESUME_AT);
    expect(p.maxRelLossDiff, what).toBeLessThan(BF16_TOL);
    expect(p.momentsExact, what).toBe(true);
    expect(p.paramsExact, what).toBe(true);
  });

  it("the summary's notes say what changed: the layout, an offload or micro-batch count that could not follow", () => {
    expect(result(key('ddp2', 'zero2-offload-2')).notes).toEqual(['layout ddp x2 -> zero2+offload x2']);
    expect(result(key('pp2-1f1b-m4', 'single')).notes).toEqual(['layout pp 2 m4 1f1b -> single']);
    expect(result(key('single', 'zero3-2', 'bf16')).notes).toEqual(['layout single -> zero3 x2']);
  });

  it("PowerSGD's per-rank state cannot follow another layout: a ddp 2 powersgd run resumed on 1 rank starts the hook fresh, and says so", () => {
    const dir = path.join(root, 'powersgd');
    const model = path.join(root, 'powersgd-model.json');
    writeFileSync(model, JSON.stringify({ model: MODEL }));
    const common = [
      '--config',
      model,
      '--steps',
      '4',
      '--seed',
      '3',
      '--batch-size',
      '8',
      '--checkpoint-interval',
      '2',
      '--eval-interval',
      '0',
    ];
    const hook = ['--grad-compression', 'powersgd:1', '--powersgd-start-iter', '0'];
    const a = shardwise(['train', ...common, '--strategy', 'ddp', '--world', '2', ...hook, '--out', dir, '--json']);
    expect(a.code, a.stderr).toBe(0);
    const b = shardwise(['train', '--resume', path.join(dir, 'checkpoints', 'step-000002'), '--world', '1', '--json']);
    expect(b.code, b.stderr).toBe(0);
    const notes = [
      'layout ddp x2 -> ddp x1',
      "PowerSGD's per-rank error feedback and warm-start factors are reset: they belong to ddp x2's ranks and buckets, not ddp x1's",
    ];
    expect(b.stderr).toContain(notes.map((n) => `shardwise: note: ${n}\n`).join(''));
    const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8'));
    expect([summary.steps, summary.notes]).toEqual([4, notes]);
  });

  it('refuses a layout that breaks a grid rule or cannot hold the model, and a setting a resume keeps, naming the flag; the folder is left as it was', () => {
    const dir = path.join(root, 'refused');
    cpSync(sources.get('single fp32')!.dir, dir, { recursive: true });
    const before = tree(dir);
    const refuse = (flags: string[]) => shardwise(['train', '--resume', dir, '--steps', '8', ...flags]);

    const grid = refuse(['--strategy', '3d', '--dp', '2', '--tp', '2', '--pp', '2', '--world', '4']);
    expect([grid.code, grid.stderr]).toEqual([
      2,
      'shardwise: cannot resume in this layout: --dp x --tp x --pp = 2 x 2 x 2 = 8 must equal --world (4): every rank is one cell of the grid; change --dp/--tp/--pp or --world\n',
    ]);
    const heads = refuse(['--strategy', 'tp', '--tp', '4']);
    expect([heads.code, heads.stderr]).toEqual([
      2,
      'shardwise: cannot resume in this layout: model.n_head (2) must be divisible by --tp 4: each rank computes whole attention heads; pick --tp among the divisors of 2 or a model with more heads\n',
    ]);
    const stages = refuse(['--strategy', 'pp', '--pp', '4']);
    expect([stages.code, stages.stderr]).toEqual([
      2,
      'shardwise: cannot resume in this layout: model.n_layer 2 is smaller than --pp 4: every pipeline stage needs at least one block; lower --pp or raise model.n_layer\n',
    ]);
    const batch = refuse(['--strategy', 'ddp', '--world', '3']);
    expect([batch.code, batch.stderr]).toEqual([
      2,
      'shardwise: cannot resume in this layout: batch size 8 is not divisible by world 3 x micro-batches 1; pick --batch-size as a multiple of 3\n',
    ]);
    const kept = refuse(['--lr', '0.1', '--config', path.join(root, 'model.json')]);
    expect(kept.code).toBe(2);
    expect(kept.stderr).toMatch(
      /^shardwise: --lr, --config do not apply to --resume: a resumed run keeps its own model, data and training settings/,
    );
    expect(tree(dir)).toEqual(before);
    expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')).parallel.strategy).toBe('single');
  });
});
