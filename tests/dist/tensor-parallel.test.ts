import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../workers/checkpoint/checkpoint.js';
import { jsonLines, shardwise, tempDir } from '../cli/helpers.js';
import { expectSameTraining } from './helpers/equivalence.js';

// Megatron tensor parallelism with real rank processes, real WebGPU (SwiftShader) and real
// all-reduces on loopback: each rank holds 1/T of the split weights, and training equals the
// single-device run. The tiny preset with 4 heads (so T = 4 splits whole heads) on
// builtin:grammar, whose vocabulary of 27 is padded to 28 rows (Megatron's
// make-vocab-size-divisible-by) with the padding logits masked out.
const STEPS = 20;
const LONG = 600_000;
const root = tempDir('tp');
const B = 12;
const T = 64;
const C = 64;
const L = 2;
const V = 27;
const PSI = 105_920;
// replicated on every rank: wpe, the layernorms and the row-parallel biases
const REPLICATED = T * C + L * (4 * C + 2 * C) + 2 * C;

interface Run {
  losses: number[];
  gradNorms: number[];
  summary: Record<string, unknown>;
  weights: Map<string, Float32Array>;
  dir: string;
}

function config(name: string, body: object): string {
  const file = path.join(root, `${name}.json`);
  writeFileSync(file, JSON.stringify(body));
  return file;
}

function train(name: string, extra: string[], steps = STEPS, model: object = { n_head: 4 }): Run {
  const dir = path.join(root, name);
  const r = shardwise([
    'train',
    '--preset',
    'tiny',
    '--config',
    config(`${name}-model`, { model }),
    '--steps',
    String(steps),
    '--batch-size',
    String(B),
    '--seed',
    '5',
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    String(steps),
    '--out',
    dir,
    '--json',
    ...extra,
  ]);
  expect(r.code, r.stderr).toBe(0);
  const lines = jsonLines(r.stdout);
  const ckpt = loadCheckpoint(path.join(dir, 'checkpoints', `step-${String(steps).padStart(6, '0')}`), { optimizer: false });
  return {
    losses: lines.filter((m) => m.type === 'step').map((m) => m.loss as number),
    gradNorms: lines.filter((m) => m.type === 'step').map((m) => m.grad_norm as number),
    summary: lines.at(-1)!,
    weights: new Map([...ckpt.params].map(([k, v]) => [k, v.data])),
    dir,
  };
}

// as tests/dist/data-parallel.test.ts: losses per step, and the relative L2 distance of the
// final weights without the key slice of c_attn.bias (its exact gradient is 0: float noise only)
type Summary = { peak_bytes: Record<string, Record<string, number>>; bytes_moved_per_step: Record<string, number>; params: number };

describe(`tensor parallel (Megatron) equals the single-device run (${STEPS} steps, global batch ${B}, 4 heads)`, () => {
  let single: Run;
  beforeAll(() => {
    single = train('single', []);
  }, LONG);

  for (const tp of [2, 4]) {
    it(
      `tp ${tp}: same losses and weights; each rank holds 1/${tp} of the split weights; exactly the all-reduces of theory per layer`,
      () => {
        const run = train(`tp${tp}`, ['--strategy', 'tp', '--tp', String(tp)]);
        expectSameTraining(run, single, `tp ${tp}`);
        // the global gradient norm (split gradients summed over the group, replicated ones once)
        // is the single-device one, so clipping (at 1.0; early norms are above it) acts the same
        const normErr = Math.max(...run.gradNorms.map((g, i) => Math.abs(g - single.gradNorms[i]!) / single.gradNorms[i]!));
        expect(normErr, `tp ${tp}: worst relative gradient-norm difference`).toBeLessThan(1e-5);
        expect(Math.max(...single.gradNorms)).toBeGreaterThan(1);
        const s = run.summary as Summary;
        const sharded = PSI - REPLICATED + (Math.ceil(V / tp) * tp - V) * C; // wte padded to a multiple of tp rows
        const perRank = REPLICATED + sharded / tp;
        expect(s.params, 'parameters per rank').toBe(perRank);
        const N = B * T;
        for (let r = 0; r < tp; r++) {
          const p = s.peak_bytes[String(r)]!;
          expect(p.params, `rank ${r} parameter bytes`).toBe(4 * perRank);
          expect(p.grads, `rank ${r} gradient bytes`).toBe(4 * perRank);
          expect(p.optimizer, `rank ${r} AdamW bytes`).toBe(8 * perRank);
          // ring all-reduce of the (N, C) activations: 2(T-1)/T of the payload per rank; the
          // three (N) cross-entropy reductions go direct ((T-1) x payload); < 1% frame headers
          const act = N * C * 4;
          const theory = 2 * L * 2 * act * ((2 * (tp - 1)) / tp) + 2 * act * ((2 * (tp - 1)) / tp) + 3 * N * 4 * (tp - 1);
          expect(s.bytes_moved_per_step[String(r)]! / theory, `rank ${r} bytes sent per step / theory ${theory}`).toBeGreaterThan(1);
          expect(s.bytes_moved_per_step[String(r)]! / theory).toBeLessThan(1.01);
        }
        // the spans of every step: per block two g all-reduces in forward and two f all-reduces in
        // backward of N*C floats; the vocab-parallel embedding's g and the head's f of N*C floats;
        // the cross-entropy's max, target logit and sum of exponentials of N floats; one float for the norm
        const spans = readFileSync(path.join(run.dir, 'spans.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l));
        const expected: string[] = ['embedding g forward 196608'];
        for (let l = 0; l < L; l++)
          expected.push(
            `block.${l} g forward ${N * C * 4}`,
            `block.${l} g forward ${N * C * 4}`,
            `block.${l} f backward ${N * C * 4}`,
            `block.${l} f backward ${N * C * 4}`,
          );
        expected.push(
          `head ce-max forward ${N * 4}`,
          `head ce-target forward ${N * 4}`,
          `head ce-sumexp forward ${N * 4}`,
          `head f backward ${N * C * 4}`,
          'optimizer grad-norm undefined 4',
        );
        for (let step = 1; step <= STEPS; step++) {
          for (let r = 0; r < tp; r++) {
            const comm = spans.filter((x) => x.rank === r && x.step === step && x.kind === 'comm');
            expect(comm.every((x) => x.name === 'allReduce' && x.labels?.tp === 1)).toBe(true);
            expect(
              comm.map((x) => `${x.labels.layer} ${x.labels.op} ${x.labels.pass} ${x.bytes}`).sort(),
              `rank ${r} step ${step} all-reduces`,
            ).toEqual([...expected].sort());
          }
        }
      },
      LONG,
    );
  }

  it(
    'partitioned activation checkpointing (tp 2, 4 layers): same training; each rank keeps half of every checkpointed block input, all-gathered before recomputation',
    () => {
      const model = { n_head: 4, n_layer: 4 };
      const steps = 3;
      const full = train(
        'ckpt-full',
        [
          '--strategy',
          'tp',
          '--tp',
          '2',
          '--activation-checkpointing',
          '--config',
          config('no-partition', { model, parallel: { partition_activations: false } }),
        ],
        steps,
        model,
      );
      const part = train('ckpt-part', ['--strategy', 'tp', '--tp', '2', '--activation-checkpointing'], steps, model);
      expectSameTraining(part, full, 'partitioned vs unpartitioned checkpointing');
      const acts = (r: Run, rank: string) => (r.summary as Summary).peak_bytes[rank]!.activations!;
      const NC4 = B * T * C * 4;
      for (const rank of ['0', '1']) {
        // unpartitioned: the 5 residual-stream tensors; partitioned: 2 working buffers + 4 halves
        expect(acts(full, rank) - acts(part, rank), `rank ${rank}: activation bytes saved`).toBe((5 - 2 - 4 / 2) * NC4);
      }
      const spans = readFileSync(path.join(part.dir, 'spans.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const gathers = spans.filter((x) => x.rank === 0 && x.step === 1 && x.kind === 'comm' && x.labels?.op === 'gather-input');
      expect(gathers.map((x) => x.labels.layer).sort()).toEqual(['block.0', 'block.1', 'block.2', 'block.3']);
      expect(gathers.every((x) => x.bytes === NC4)).toBe(true);
    },
    LONG,
  );

  it(
    '--resume of a tp run continues with the same losses (full checkpoints gathered from the shards, re-sharded on load); eval reads them',
    () => {
      const dir = path.join(root, 'resume-a');
      const args = [
        'train',
        '--preset',
        'tiny',
        '--config',
        config('resume-model', { model: { n_head: 4 } }),
        '--steps',
        '4',
        '--batch-size',
        String(B),
        '--seed',
        '5',
        '--eval-interval',
        '0',
        '--checkpoint-interval',
        '2',
        '--json',
        '--strategy',
        'tp',
        '--tp',
        '2',
      ];
      const a = shardwise([...args, '--out', dir]);
      expect(a.code, a.stderr).toBe(0);
      const losses = (out: string) =>
        jsonLines(out)
          .filter((m) => m.type === 'step')
          .map((m) => [m.step, m.loss]);
      const copy = path.join(root, 'resume-b');
      cpSync(dir, copy, { recursive: true });
      rmSync(path.join(copy, 'checkpoints', 'step-000004'), { recursive: true });
      const b = shardwise(['train', '--resume', copy, '--json']);
      expect(b.code, b.stderr).toBe(0);
      expect(losses(b.stdout)).toEqual(losses(a.stdout).slice(2));
      const text = path.join(root, 'eval.txt');
      writeFileSync(text, 'the cat sat on the mat and the dog ran to the park with a big red ball. '.repeat(4));
      const e = shardwise(['eval', dir, '--text', text, '--json']);
      expect(e.code, e.stderr).toBe(0);
      expect(Number.isFinite(JSON.parse(e.stdout).loss)).toBe(true);
    },
    LONG,
  );

  it('refuses impossible layouts with the field named', () => {
    const out = path.join(root, 'bad');
    const heads = shardwise(['train', '--preset', 'tiny', '--strategy', 'tp', '--tp', '4', '--steps', '1', '--out', out]);
    expect(heads.code).not.toBe(0);
    expect(heads.stderr).toMatch(/model\.n_head \(2\) must be divisible by --tp 4/);
    const world = shardwise(['train', '--preset', 'tiny', '--strategy', 'tp', '--tp', '2', '--world', '4', '--steps', '1', '--out', out]);
    expect(world.code).not.toBe(0);
    expect(world.stderr).toMatch(/--world 4 must equal --tp 2/);
    const notTp = shardwise(['train', '--preset', 'tiny', '--strategy', 'ddp', '--tp', '2', '--steps', '1', '--out', out]);
    expect(notTp.code).not.toBe(0);
    expect(notTp.stderr).toMatch(/--tp applies to --strategy tp/);
    const partition = shardwise([
      'train',
      '--preset',
      'tiny',
      '--strategy',
      'ddp',
      '--config',
      config('ds-partition', { activation_checkpointing: { partition_activations: true } }),
      '--steps',
      '1',
      '--out',
      out,
    ]);
    expect(partition.code).not.toBe(0);
    expect(partition.stderr).toMatch(/partition_activations needs --strategy tp/);
  });
});
