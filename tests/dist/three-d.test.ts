import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { predictModelStateBytes } from '../../common/model-state.js';
import { loadCheckpoint } from '../../workers/checkpoint/checkpoint.js';
import { BIN, jsonLines, shardwise, tempDir } from '../cli/helpers.js';
import { expectSameTraining } from './helpers/equivalence.js';
import { BF16_STEPS, mixedTolerance, tensorParallelReductions } from './helpers/mixed-precision.js';
import { alive, killRankMidRun } from './helpers/processes.js';

// 3D parallelism (--strategy 3d) with 8 real rank processes (D=2 data-parallel replicas x T=2
// tensor-parallel shards x P=2 pipeline stages), real WebGPU (SwiftShader) and real sockets,
// against the single-device run of the same seed and global batch. A tiny model keeps 8 ranks
// on 2 cores quick: 2 blocks (one per stage), 2 heads (one per TP rank), d_model 32, T 16,
// global batch 8 (4 rows per replica, 2 micro-batches of 2), vocabulary 27 padded to 28.
const LONG = 600_000;
const STEPS = 20;
const root = tempDir('3d');
const B = 8;
const T = 16;
const C = 32;
const MODEL = path.join(root, 'model.json');
writeFileSync(MODEL, JSON.stringify({ model: { n_layer: 2, n_head: 2, d_model: C, block_size: T } }));
const GRID = ['--strategy', '3d', '--dp', '2', '--tp', '2', '--pp', '2', '--micro-batches', '2'];
/**
 * The bf16 run's bound (helpers/mixed-precision.ts: why not bit for bit, and the derivation), with
 * every sum that rounds bf16 partial results on a gradient's path: TP's partial products
 * (2(1 + 2L)), a replica's gradients (ZeRO-1's reduce-scatter) and a stage's share of the tied
 * wte's gradient: k = 2(1 + 2L) + 2 = 12. Measured (20 steps): 6.7e-3 of the weights, 2.2e-4 of
 * the worst loss.
 */
const MIXED_TOL = mixedTolerance(
  BF16_STEPS,
  6e-3,
  { n_layer: 2, n_head: 2, d_model: C, block_size: T, vocab_size: 27 },
  5,
  tensorParallelReductions(2) + 2,
);

interface Run {
  losses: number[];
  gradNorms: number[];
  summary: Record<string, unknown>;
  weights: Map<string, Float32Array>;
  dir: string;
}

const args = (name: string, steps: number, extra: string[]) => [
  'train',
  '--preset',
  'tiny',
  '--config',
  MODEL,
  '--steps',
  String(steps),
  '--batch-size',
  String(B),
  '--seed',
  '5',
  '--eval-interval',
  String(steps),
  '--eval-batches',
  '1',
  '--checkpoint-interval',
  String(steps),
  '--out',
  path.join(root, name),
  '--json',
  ...extra,
];

function parse(name: string, steps: number, stdout: string): Run {
  const dir = path.join(root, name);
  const lines = jsonLines(stdout);
  const ckpt = loadCheckpoint(path.join(dir, 'checkpoints', `step-${String(steps).padStart(6, '0')}`), { optimizer: false });
  return {
    losses: lines.filter((m) => m.type === 'step').map((m) => m.loss as number),
    gradNorms: lines.filter((m) => m.type === 'step').map((m) => m.grad_norm as number),
    summary: lines.at(-1)!,
    weights: new Map([...ckpt.params].map(([k, v]) => [k, v.data])),
    dir,
  };
}

/** Runs at once (the 3d ranks mostly wait on each other). */
function trainConcurrently(runs: { name: string; steps: number; extra: string[] }[]): Promise<Run[]> {
  return Promise.all(
    runs.map(
      (r) =>
        new Promise<Run>((resolve, reject) => {
          const child = spawn(process.execPath, [BIN, ...args(r.name, r.steps, r.extra)], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
          let out = '';
          let err = '';
          child.stdout.on('data', (d) => (out += d));
          child.stderr.on('data', (d) => (err += d));
          child.on('exit', (code) => {
            try {
              if (code !== 0) throw new Error(`${r.name}: exit ${code}: ${err}`);
              resolve(parse(r.name, r.steps, out));
            } catch (e) {
              reject(e);
            }
          });
        }),
    ),
  );
}

// as tests/dist/tensor-parallel.test.ts: losses per step, and the relative L2 distance of the
// final weights without the key slice of c_attn.bias (its exact gradient is 0: float noise only)
describe(`3D parallelism (D=2 x T=2 x P=2, 8 ranks) equals the single-device run (${STEPS} steps)`, () => {
  let single: Run;
  let threeD: Run;
  let gpipe: Run;
  beforeAll(async () => {
    [single, threeD] = await trainConcurrently([
      { name: 'single', steps: STEPS, extra: [] },
      { name: '3d-1f1b', steps: STEPS, extra: GRID },
    ]);
    [gpipe] = await trainConcurrently([{ name: '3d-gpipe', steps: STEPS, extra: [...GRID, '--schedule', 'gpipe'] }]);
  }, LONG);

  it('1F1B: same losses, gradient norms (clipping) and final weights; full checkpoint in the single-device layout', () => {
    expect(single.gradNorms[0]).toBeGreaterThan(1); // grad_clip 1 clips
    expectSameTraining(threeD, single, '3d 1f1b', { gradNorms: true });
    expect(threeD.summary.strategy).toBe('3d');
    expect(threeD.summary.grid).toEqual({ dp: 2, tp: 2, pp: 2 });
  });

  it(`GPipe: same losses, gradient norms and final weights (${STEPS} steps)`, () => {
    expectSameTraining(gpipe, single, '3d gpipe', { gradNorms: true });
    expect(gpipe.summary.grid).toEqual({ dp: 2, tp: 2, pp: 2 });
  });

  it('each rank holds only its stage and its TP shard; the stage layout follows the grid (rank = pp*4 + dp*2 + tp)', () => {
    const stages = threeD.summary.stages as { rank: number; index: number; from: number; to: number; params: number }[];
    expect(stages.map((s) => s.index)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect(stages.map((s) => [s.from, s.to])).toEqual([...Array(4).fill([0, 1]), ...Array(4).fill([1, 2])]);
    const psi = single.summary.params as number;
    const peak = threeD.summary.peak_bytes as Record<string, Record<string, number>>;
    const single0 = (single.summary.peak_bytes as Record<string, Record<string, number>>)['0']!;
    for (let r = 0; r < 8; r++) {
      // one stage's TP shard: well under half of the model (each stage keeps a copy of its wte shard)
      expect(stages[r]!.params, `rank ${r} parameters`).toBeLessThan(psi / 2);
      expect(peak[String(r)]!.params, `rank ${r} parameter bytes`).toBeLessThan(single0.params! / 2);
    }
    // the DP replicas of a shard hold the same number of parameters; the TP shards of a stage too
    for (const [a, b] of [
      [0, 2],
      [1, 3],
      [4, 6],
      [5, 7],
      [0, 1],
      [4, 5],
    ])
      expect(stages[a]!.params).toBe(stages[b]!.params);
    expect(typeof threeD.summary.val_loss).toBe('number');
  });

  it('the three groups are used: exactly the TP all-reduces of theory per micro-batch, one boundary send and receive per micro-batch, ZeRO-1 over DP', () => {
    const spans = readFileSync(path.join(threeD.dir, 'spans.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { rank: number; step: number; kind: string; name: string; bytes: number; labels?: Record<string, unknown> },
      );
    const step1 = spans.filter((s) => s.step === 1 && s.kind === 'comm');
    const boundary = (B / 2 / 2) * T * C * 4; // rows per micro-batch x T x C floats
    for (let r = 0; r < 8; r++) {
      const mine = step1.filter((s) => s.rank === r);
      const op = (name: string, f: (s: (typeof mine)[number]) => boolean = () => true) =>
        mine.filter((s) => s.name.startsWith(name) && f(s));
      // stage 0 (embedding + block 0): g of the embedding, 2 g per block forward, 2 f per block backward = 5;
      // stage 1 (block 1 + head): 2 g + 3 for vocab-parallel cross-entropy forward, 2 f + 1 f of the head backward = 8
      const tp = op('allReduce', (s) => s.labels?.tp === 1 && s.labels?.what !== 'gradient norm');
      expect(tp, `rank ${r} TP all-reduces`).toHaveLength(2 * (r < 4 ? 5 : 8));
      expect(
        op('send').map((s) => s.bytes),
        `rank ${r} sends`,
      ).toEqual([boundary, boundary]);
      expect(op('recv'), `rank ${r} receives`).toHaveLength(2);
      expect(
        op('reduceScatter', (s) => s.labels?.dp === 1),
        `rank ${r} DP gradient reduce-scatter`,
      ).toHaveLength(1);
      expect(
        op('allGather', (s) => s.labels?.dp === 1 && s.labels?.what === 'weights'),
        `rank ${r} DP weight all-gather`,
      ).toHaveLength(1);
    }
  });

  it(
    `bf16 (${BF16_STEPS} steps): the single-device bf16 losses and weights within ${MIXED_TOL.toFixed(3)} (S·k·2u·lr/RMS, k = 12; not bit for bit: each rank rounds its partial products and gradients to bf16 before the sum); 16-bit weights and gradients, ZeRO-1 keeping the fp32 master and moments of half the shard; every tensor payload moves as bf16 (the cross-entropy statistics and norms as f32)`,
    async () => {
      const [single16, run] = await trainConcurrently([
        { name: 'single-bf16', steps: BF16_STEPS, extra: ['--precision', 'bf16'] },
        { name: '3d-bf16', steps: BF16_STEPS, extra: [...GRID, '--precision', 'bf16'] },
      ]);
      expectSameTraining(run!, single16!, '3d bf16', { steps: BF16_STEPS, tolerance: MIXED_TOL });
      const stages = run!.summary.stages as { rank: number; params: number }[];
      const peak = run!.summary.peak_bytes as Record<string, Record<string, number>>;
      for (let r = 0; r < 8; r++) {
        const [p, psi] = [peak[String(r)]!, stages[r]!.params];
        expect([p.params, p.grads], `rank ${r} 16-bit weights and gradients`).toEqual([2 * psi, 2 * psi]);
        // 12 bytes (master, m, v) for half of the stage's flat layout in 16-bit slots (128 elements), wte's
        // 27 rows padded to 32 (4T): exactly the launch form's and the memory chart's formula
        const predicted = predictModelStateBytes({
          strategy: '3d',
          world: 8,
          dp: 2,
          tp: 2,
          pp: 2,
          params: run!.summary.params as number,
          rank: r,
          precision: 'bf16',
          model: { n_layer: 2, d_model: C, block_size: T, vocab_size: 27 },
        });
        expect({ params: p.params, grads: p.grads, optimizer: p.optimizer }, `rank ${r} model states against the formula`).toEqual(
          predicted,
        );
      }
      const spans = readFileSync(path.join(run!.dir, 'spans.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map(
          (l) =>
            JSON.parse(l) as { rank: number; step: number; kind: string; name: string; bytes: number; labels?: Record<string, unknown> },
        );
      const Nm = (B / 2 / 2) * T; // tokens per micro-batch
      for (let r = 0; r < 8; r++) {
        const mine = spans.filter((s) => s.step === 1 && s.kind === 'comm' && s.rank === r);
        const op = (name: string, f: (s: (typeof mine)[number]) => boolean) => mine.filter((s) => s.name.startsWith(name) && f(s));
        // the (Nm, C) activations and their gradients in bf16; the cross-entropy's row statistics in f32
        for (const s of op('allReduce', (x) => x.labels?.tp === 1 && x.labels?.what !== 'gradient norm'))
          expect(s.bytes, `rank ${r} TP ${String(s.labels?.op)}`).toBe(String(s.labels?.op).startsWith('ce-') ? Nm * 4 : Nm * C * 2);
        expect(
          op('send', () => true).map((s) => s.bytes),
          `rank ${r} boundary sends`,
        ).toEqual([Nm * C * 2, Nm * C * 2]);
        // ZeRO-1: the stage shard's parameter elements (no slot padding), 2 bytes each, reduce-scattered and all-gathered
        expect(op('reduceScatter', (s) => s.labels?.dp === 1).map((s) => s.bytes)).toEqual([2 * stages[r]!.params]);
        expect(op('allGather', (s) => s.labels?.dp === 1 && s.labels?.what === 'weights').map((s) => s.bytes)).toEqual([
          2 * stages[r]!.params,
        ]);
        // the tied wte's gradient: the real rows of this TP rank's shard (32 padded rows / 2 = 16: 16 and 11 real)
        expect(op('allReduce', (s) => s.labels?.what === 'tied wte gradient').map((s) => s.bytes)).toEqual([
          (r % 2 === 0 ? 16 : 11) * C * 2,
        ]);
      }
    },
    LONG,
  );

  it('ZeRO-1 across each DP group: a rank keeps the AdamW moments of half its shard (a full AdamW would be twice the parameter bytes)', () => {
    const peak = threeD.summary.peak_bytes as Record<string, Record<string, number>>;
    for (let r = 0; r < 8; r++) {
      const p = peak[String(r)]!;
      expect(p.optimizer, `rank ${r} optimizer bytes`).toBeGreaterThan(0.8 * p.params!);
      expect(p.optimizer, `rank ${r} optimizer bytes`).toBeLessThan(1.2 * p.params!);
    }
  });
});

it('refuses impossible 3D layouts with the field named', () => {
  const out = path.join(root, 'bad');
  const run = (extra: string[], model = MODEL) =>
    shardwise(['train', '--preset', 'tiny', '--config', model, '--steps', '1', '--batch-size', String(B), '--out', out, ...extra]);
  const world = run([...GRID, '--world', '6']);
  expect(world.code).not.toBe(0);
  expect(world.stderr).toMatch(/--dp x --tp x --pp = 2 x 2 x 2 = 8 must equal --world \(6\)/);
  const heads = run(['--strategy', '3d', '--dp', '1', '--tp', '4', '--pp', '2']);
  expect(heads.code).not.toBe(0);
  expect(heads.stderr).toMatch(/model\.n_head \(2\) must be divisible by --tp 4: each rank computes whole attention heads/);
  const layers = run(['--strategy', '3d', '--dp', '2', '--tp', '1', '--pp', '3']);
  expect(layers.code).not.toBe(0);
  expect(layers.stderr).toMatch(/model\.n_layer 2 is smaller than --pp 3: every pipeline stage needs at least one block/);
  const micro = run([...GRID.slice(0, -1), '3']);
  expect(micro.code).not.toBe(0);
  expect(micro.stderr).toMatch(/batch size 8 is not divisible by dp 2 x micro-batches 3; pick --batch-size as a multiple of 6/);
  const notThreeD = run(['--strategy', 'ddp', '--dp', '2']);
  expect(notThreeD.code).not.toBe(0);
  expect(notThreeD.stderr).toMatch(/--dp applies to --strategy 3d/);
});

it(
  'checkpoints hold the whole model (TP shards and ZeRO-1 moments gathered): --resume of a 3d run continues to the same losses',
  () => {
    const dir = path.join(root, 'resume');
    const r1 = shardwise([
      ...args('resume', 4, GRID).filter((_, i, a) => a[i - 1] !== '--checkpoint-interval' && a[i] !== '--checkpoint-interval'),
      '--checkpoint-interval',
      '2',
    ]);
    expect(r1.code, r1.stderr).toBe(0);
    const losses = jsonLines(r1.stdout)
      .filter((m) => m.type === 'step')
      .map((m) => m.loss as number);
    const ckpt = loadCheckpoint(path.join(dir, 'checkpoints', 'step-000004'), { optimizer: true });
    expect(ckpt.optimizer!.step).toBe(4);
    expect(ckpt.params.get('transformer.wte.weight')!.data.length).toBe(27 * C); // unpadded vocabulary, single-device layout
    const r2 = shardwise(['train', '--resume', path.join(dir, 'checkpoints', 'step-000002'), '--json']);
    expect(r2.code, r2.stderr).toBe(0);
    expect(
      jsonLines(r2.stdout)
        .filter((m) => m.type === 'step')
        .map((m) => m.loss as number),
    ).toEqual(losses.slice(2));
  },
  LONG,
);

it(
  'kill -9 of one rank (stage 1, data-parallel 0, tensor-parallel 1 = rank 5 of 8) mid-step: the run fails within the deadline naming the stage and rank, and no rank process is left',
  async () => {
    const out = path.join(root, 'kill');
    const { code, msAfterKill, stderr, ranks } = await killRankMidRun(
      args('kill', 2000, [...GRID, '--checkpoint-interval', '0', '--eval-interval', '0']),
      5,
      2,
    );
    expect([...ranks.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(code).not.toBe(0);
    expect(msAfterKill).toBeLessThan(15_000);
    // the first report wins: rank 5's death itself, or a peer's collective or transfer losing it
    // (its TP partner rank 4, its DP replica rank 7, its stage-0 neighbour rank 1)
    const last = stderr.trim().split('\n').at(-1)!;
    expect(last).toMatch(
      /^shardwise: (rank 5 \(pipeline stage 1, data-parallel 0, tensor-parallel 1\) was killed by SIGKILL|rank \d: pipeline stage [01] \(rank \d\) .*the peer is pipeline stage 1.* \(rank 5\))/,
    );
    expect(JSON.parse(readFileSync(path.join(out, 'state.json'), 'utf8')).status).toBe('failed');
    const gone = Date.now();
    while ([...ranks.values()].some(alive) && Date.now() - gone < 3000) await new Promise((r) => setTimeout(r, 100));
    for (const [rank, pid] of ranks) expect(alive(pid), `rank ${rank} (pid ${pid}) still running`).toBe(false);
  },
  LONG,
);
