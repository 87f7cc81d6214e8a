import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../workers/checkpoint/checkpoint.js';
import { shmSupported } from '../../workers/comm/index.js';
import { jsonLines, shardwise, stepLosses, tempDir } from '../cli/helpers.js';
import { expectSameTraining } from './helpers/equivalence.js';

// Real rank processes on loopback, real WebGPU buffers (SwiftShader), real WebSocket traffic:
// every strategy must train the single-device model to the same numbers.
const STEPS = 30;
const LONG = 900_000; // several multi-process runs on SwiftShader per test
const root = tempDir('dp');
const PSI = 105_920; // tiny preset on builtin:grammar (vocab 27)

interface Run {
  losses: number[];
  summary: Record<string, unknown>;
  weights: Map<string, Float32Array>;
  dir: string;
}

function train(name: string, extra: string[], steps = STEPS): Run {
  const dir = path.join(root, name);
  const r = shardwise([
    'train',
    '--preset',
    'tiny',
    '--steps',
    String(steps),
    '--batch-size',
    '12',
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
    summary: lines.at(-1)!,
    weights: new Map([...ckpt.params].map(([k, v]) => [k, v.data])),
    dir,
  };
}

describe(`data-parallel strategies equal the single-device run (${STEPS} steps, global batch 12)`, () => {
  let single: Run;
  let ddp2: Run;
  /** the world-2 zero1 and zero2 runs (the uncompressed baselines of the 16-bit reduce-scatter) */
  const zero2ranks: Partial<Record<'zero1' | 'zero2', Run>> = {};
  beforeAll(() => {
    single = train('single', []);
  }, LONG);

  it(
    'ddp at world 2 (default buckets): same losses and weights, 16Ψ model states, 2Ψ(N-1)/N floats sent, overlap',
    () => {
      const run = (ddp2 = train('ddp2', ['--strategy', 'ddp', '--world', '2']));
      expectSameTraining(run, single, 'ddp world 2', { steps: STEPS });
      const s = run.summary as {
        peak_bytes: Record<string, Record<string, number>>;
        bytes_moved_per_step: Record<string, number>;
        shm_bytes_per_step: Record<string, number>;
        overlap_pct: number;
        buckets: number;
        params: number;
      };
      expect(s.params).toBe(PSI);
      for (const r of ['0', '1']) {
        const p = s.peak_bytes[r]!;
        expect(p.params! + p.grads! + p.optimizer!, `rank ${r} model states`).toBe(16 * PSI);
        // ring all-reduce: each rank sends 2(N-1)/N of the gradient; the flat layout's 256-byte
        // slot padding and frame headers add < 1%
        const theory = ((2 * (2 - 1)) / 2) * PSI * 4;
        expect(s.bytes_moved_per_step[r]).toBeGreaterThanOrEqual(theory);
        expect(s.bytes_moved_per_step[r]! / theory).toBeLessThan(1.01);
        // both ranks on this machine: every gradient piece (all over the 16 KiB inline limit)
        // went through the shared-memory rings; only frame headers went over the socket
        if (shmSupported()) expect(s.shm_bytes_per_step[r]! / theory, `rank ${r} shared-memory share`).toBeGreaterThan(0.99);
        else expect(s.shm_bytes_per_step[r]).toBe(0);
        expect(s.shm_bytes_per_step[r]!).toBeLessThan(s.bytes_moved_per_step[r]!);
      }
      expect(s.buckets).toBeGreaterThan(1);
      expect(s.overlap_pct).toBeGreaterThan(0);
      // spans: bucket all-reduces start while backward is still running: in steps where the
      // device is not starved by the other processes on this CPU, one starts before the backward
      // of the embedding (the last layer of backward) has ended
      const spans = readFileSync(path.join(run.dir, 'spans.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      let overlapped = 0;
      for (let step = 1; step <= STEPS; step++) {
        const mine = spans.filter((x) => x.rank === 0 && x.step === step);
        const embBackward = mine.find((x) => x.kind === 'backward' && x.name === 'embedding');
        const bucketComm = mine.filter((x) => x.kind === 'comm' && x.labels?.bucket !== undefined);
        expect(bucketComm.length).toBe(s.buckets);
        if (Math.min(...bucketComm.map((x) => x.start)) < embBackward.end) overlapped++;
      }
      expect(overlapped, `steps (of ${STEPS}) where an all-reduce started before backward ended`).toBeGreaterThan(0);
    },
    LONG,
  );

  it(
    'ddp with --grad-compression fp16 and powersgd:4 (from step 2): half and under a fifth of the bytes, loss within 1% and 15% of the uncompressed run after 30 tiny steps; PowerSGD resumed from its step-25 checkpoint trains steps 26-30 bit for bit',
    () => {
      ddp2 ??= train('ddp2', ['--strategy', 'ddp', '--world', '2']);
      const base = ddp2.summary as { bytes_moved_per_step: Record<string, number>; final_loss: number };
      const fp16 = train('ddp-fp16', ['--strategy', 'ddp', '--world', '2', '--grad-compression', 'fp16']);
      const psgd = train('ddp-powersgd', [
        '--strategy',
        'ddp',
        '--world',
        '2',
        '--grad-compression',
        'powersgd:4',
        '--powersgd-start-iter',
        '2',
        '--checkpoint-interval',
        '25',
      ]);
      for (const [run, ratio, loss] of [
        [fp16, 0.51, 0.01],
        [psgd, 0.2, 0.15],
      ] as const) {
        const s = run.summary as typeof base & { grad_compression: Record<string, { hook: string; compression_ratio: number }> };
        for (const r of ['0', '1']) expect(s.bytes_moved_per_step[r]! / base.bytes_moved_per_step[r]!).toBeLessThan(ratio);
        expect(Math.abs(s.final_loss - base.final_loss) / base.final_loss).toBeLessThan(loss);
        expect(s.grad_compression['0']!.compression_ratio).toBeGreaterThan(1.9);
      }
      // fp16 halves the gradient payload; frame headers keep it just above half
      const fp16Bytes = (fp16.summary as typeof base).bytes_moved_per_step['0']!;
      expect(fp16Bytes / base.bytes_moved_per_step['0']!).toBeGreaterThanOrEqual(0.5);

      // resume: the step-25 checkpoint holds every rank's error feedback, warm-start Q and
      // iteration (they differ per rank); without them step 26 would start from zero error
      const copy = path.join(root, 'ddp-powersgd-resumed');
      cpSync(psgd.dir, copy, { recursive: true });
      const hooks = loadCheckpoint(path.join(copy, 'checkpoints', 'step-000025')).commHook!;
      expect(hooks.setting).toMatchObject({ hook: 'powersgd', matrix_approximation_rank: 4 });
      expect(hooks.ranks.map((r) => r.iter)).toEqual([25, 25]);
      const [e0, e1] = hooks.ranks.map((r) => r.tensors.get('error.0')!);
      expect(e0!.length).toBeGreaterThan(0);
      expect(e0, 'the ranks keep different error feedback').not.toEqual(e1);
      const resumed = shardwise(['train', '--resume', path.join(copy, 'checkpoints', 'step-000025'), '--json']);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(stepLosses(resumed.stdout)).toEqual(psgd.losses.slice(25));
      const final = (dir: string) =>
        loadCheckpoint(path.join(dir, 'checkpoints', `step-${String(STEPS).padStart(6, '0')}`), { optimizer: false });
      for (const [name, w] of final(psgd.dir).params) expect(final(copy).params.get(name)!.data, name).toEqual(w.data);
    },
    LONG,
  );

  it(
    'ddp at world 3',
    () => {
      expectSameTraining(train('ddp3', ['--strategy', 'ddp', '--world', '3']), single, 'ddp world 3', { steps: STEPS });
    },
    LONG,
  );

  it(
    'ddp with one parameter per bucket, and with the whole model in one bucket',
    () => {
      const each = train('ddp-each', ['--strategy', 'ddp', '--world', '2', '--bucket-cap-mb', '0']);
      expectSameTraining(each, single, 'ddp one parameter per bucket', { steps: STEPS });
      expect(each.summary.buckets).toBe(28);
      const whole = train('ddp-whole', ['--strategy', 'ddp', '--world', '2', '--bucket-cap-mb', '1000', '--config', wholeModelConfig()]);
      expectSameTraining(whole, single, 'ddp whole model', { steps: STEPS });
      expect(whole.summary.buckets).toBe(1);
    },
    LONG,
  );

  it(
    'ddp with activation checkpointing',
    () => {
      const run = train('ddp-ckpt', ['--strategy', 'ddp', '--world', '2', '--activation-checkpointing']);
      expectSameTraining(run, single, 'ddp + activation checkpointing', { steps: STEPS });
      const full = ddp2 ?? train('ddp-full', ['--strategy', 'ddp', '--world', '2']);
      const acts = (r: Run) => (r.summary.peak_bytes as Record<string, Record<string, number>>)['0']!.activations!;
      expect(acts(run)).toBeLessThan(acts(full));
    },
    LONG,
  );

  it(
    'dp (parameter server) at world 2 and 3: rank 0 receives and sends (N-1)Ψ floats',
    () => {
      for (const n of [2, 3]) {
        const run = train(`dp${n}`, ['--strategy', 'dp', '--world', String(n)]);
        expectSameTraining(run, single, `dp world ${n}`, { steps: STEPS });
        const s = run.summary as { peak_bytes: Record<string, Record<string, number>>; bytes_moved_per_step: Record<string, number> };
        const theory = (n - 1) * PSI * 4;
        expect(s.bytes_moved_per_step['0']! / theory).toBeGreaterThanOrEqual(1);
        expect(s.bytes_moved_per_step['0']! / theory).toBeLessThan(1.01);
        // only the parameter server keeps optimizer state
        expect(s.peak_bytes['0']!.optimizer).toBe(8 * PSI);
        expect(s.peak_bytes['1']!.optimizer).toBe(0);
      }
    },
    LONG,
  );

  it(
    'zero1 at world 2 and 3: same training, optimizer states 8Ψ/N per rank, 2Ψ(N-1)/N floats sent',
    () => {
      for (const n of [2, 3]) {
        const run = train(`zero1-${n}`, ['--strategy', 'zero1', '--world', String(n)]);
        if (n === 2) zero2ranks.zero1 = run;
        expectSameTraining(run, single, `zero1 world ${n}`, { steps: STEPS });
        const s = run.summary as { peak_bytes: Record<string, Record<string, number>>; bytes_moved_per_step: Record<string, number> };
        for (let r = 0; r < n; r++) {
          const p = s.peak_bytes[String(r)]!;
          expect(p.params).toBe(4 * PSI);
          expect(p.grads).toBe(4 * PSI);
          // the shard is a 256-byte-aligned range of the flat layout, whose slots pad each tensor to 64 floats
          expect(Math.abs(p.optimizer! - (8 * PSI) / n), `rank ${r} optimizer bytes`).toBeLessThan(8 * 64 * 28);
          const theory = ((2 * (n - 1)) / n) * PSI * 4;
          expect(s.bytes_moved_per_step[String(r)]! / theory).toBeGreaterThan(0.99);
          expect(s.bytes_moved_per_step[String(r)]! / theory).toBeLessThan(1.02);
        }
      }
    },
    LONG,
  );

  it(
    'zero2 at world 2 and 3: same training, gradients 4Ψ/N and optimizer states 8Ψ/N per rank, constant-size bucket buffers, 2Ψ(N-1)/N floats sent',
    () => {
      for (const n of [2, 3]) {
        const run = train(`zero2-${n}`, ['--strategy', 'zero2', '--world', String(n)]);
        if (n === 2) zero2ranks.zero2 = run;
        expectSameTraining(run, single, `zero2 world ${n}`, { steps: STEPS });
        const s = run.summary as { peak_bytes: Record<string, Record<string, number>>; bytes_moved_per_step: Record<string, number> };
        for (let r = 0; r < n; r++) {
          const p = s.peak_bytes[String(r)]!;
          expect(p.params).toBe(4 * PSI);
          expect(Math.abs(p.grads! - (4 * PSI) / n), `rank ${r} gradient bytes`).toBeLessThan(4 * 64 * 28);
          expect(Math.abs(p.optimizer! - (8 * PSI) / n), `rank ${r} optimizer bytes`).toBeLessThan(8 * 64 * 28);
          // two ring buffers of whole-layer buckets + one for the embedding: the same at any world size
          expect(p.comm).toBeGreaterThan(0);
          expect(p.comm).toBe(s.peak_bytes['0']!.comm);
          const theory = ((2 * (n - 1)) / n) * PSI * 4;
          expect(s.bytes_moved_per_step[String(r)]! / theory).toBeGreaterThan(0.99);
          expect(s.bytes_moved_per_step[String(r)]! / theory).toBeLessThan(1.02);
        }
      }
    },
    LONG,
  );

  it(
    "zero2 with --grad-compression bf16 (30 steps) and zero1 with fp16 (4 steps) at world 2: the gradient reduce-scatter moves half its bytes (the weights' all-gather stays float32: 3/4 of the step's bytes); zero2's loss within 1% of uncompressed",
    () => {
      // the bytes per step do not depend on the run's length: zero1 runs 4 steps, only zero2 the 30 its loss is compared at
      for (const [stage, hook, steps] of [
        ['zero2', 'bf16', STEPS],
        ['zero1', 'fp16', 4],
      ] as const) {
        const base = (zero2ranks[stage] ??= train(`${stage}-2`, ['--strategy', stage, '--world', '2']));
        const run = train(`${stage}-${hook}`, ['--strategy', stage, '--world', '2', '--grad-compression', hook], steps);
        type Summary = {
          final_loss: number;
          bytes_moved_per_step: Record<string, number>;
          grad_compression: Record<string, { hook: string; compression_ratio: number }>;
        };
        const s = run.summary as Summary;
        const b = base.summary as Summary;
        if (steps === STEPS)
          expect(Math.abs(s.final_loss - b.final_loss) / b.final_loss, `${stage} ${hook} final loss against uncompressed`).toBeLessThan(
            0.01,
          );
        for (const r of ['0', '1']) {
          expect(s.grad_compression[r]).toMatchObject({ hook, compression_ratio: 2 });
          // the payload of every gradient reduce-scatter per step, from the spans: exactly half of float32's
          const gradBytesPerStep = (dir: string, n: number) =>
            readFileSync(path.join(dir, 'spans.jsonl'), 'utf8')
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l))
              .filter((x) => x.rank === Number(r) && x.kind === 'comm' && x.labels?.what === 'gradients')
              .reduce((a, x) => a + x.bytes, 0) / n;
          expect(
            gradBytesPerStep(run.dir, steps) / gradBytesPerStep(base.dir, STEPS),
            `${stage} ${hook} rank ${r} reduce-scatter payload`,
          ).toBe(0.5);
          // on the wire: Ψ/2 of gradients in 2 bytes + Ψ/2 of weights in 4, against 4 + 4; frame headers add < 1%
          const ratio = s.bytes_moved_per_step[r]! / b.bytes_moved_per_step[r]!;
          expect(ratio, `${stage} ${hook} rank ${r} bytes moved per step against uncompressed`).toBeGreaterThan(0.745);
          expect(ratio).toBeLessThan(0.755);
        }
      }
    },
    LONG,
  );

  it(
    'zero3 at world 2 (prefetch on) and 3 (prefetch off): same training, 16Ψ/N model states plus a constant working set, 3Ψ(N-1)/N floats sent',
    () => {
      const workingSets: number[] = [];
      for (const [n, prefetch] of [
        [2, 'on'],
        [3, 'off'],
      ] as const) {
        const run = train(`zero3-${n}`, ['--strategy', 'zero3', '--world', String(n), '--prefetch', prefetch]);
        expectSameTraining(run, single, `zero3 world ${n} prefetch ${prefetch}`, { steps: STEPS });
        const s = run.summary as { peak_bytes: Record<string, Record<string, number>>; bytes_moved_per_step: Record<string, number> };
        let sent = 0;
        for (let r = 0; r < n; r++) {
          const p = s.peak_bytes[String(r)]!;
          const slack = 64 * 28; // slot padding of the flat layout, in floats
          expect(Math.abs(p.grads! - (4 * PSI) / n), `rank ${r} gradient bytes`).toBeLessThan(4 * slack);
          expect(Math.abs(p.optimizer! - (8 * PSI) / n), `rank ${r} optimizer bytes`).toBeLessThan(8 * slack);
          // weights: the own 4Ψ/N shard plus the gathered working set (two layer rings and the embedding)
          workingSets.push(p.params! - (4 * PSI) / n);
          sent += s.bytes_moved_per_step[String(r)]!;
        }
        // uneven layer/shard intersections make single ranks send more or less; the mean is the theory
        const theory = ((3 * (n - 1)) / n) * PSI * 4;
        expect(sent / n / theory).toBeGreaterThan(0.99);
        expect(sent / n / theory).toBeLessThan(1.02);
      }
      // the working set does not depend on the number of ranks (and is well under the full 4Ψ)
      expect(Math.max(...workingSets) - Math.min(...workingSets)).toBeLessThan(4 * 64 * 28);
      expect(Math.max(...workingSets)).toBeLessThan(4 * PSI);
    },
    LONG,
  );

  it(
    'ZeRO-Offload with zero1 and zero2 at world 2: same training, no optimizer bytes on the device, 8Ψ/N moments and 4Ψ/N master weights on the host',
    () => {
      for (const stage of ['zero1', 'zero2']) {
        const run = train(`${stage}-offload`, ['--strategy', stage, '--world', '2', '--offload-optimizer', 'cpu']);
        expectSameTraining(run, single, `${stage} + offload world 2`, { steps: STEPS });
        const s = run.summary as { peak_bytes: Record<string, Record<string, number>> };
        for (const r of ['0', '1']) {
          const p = s.peak_bytes[r]!;
          expect(p.optimizer).toBe(0);
          expect(p.params).toBe(4 * PSI);
          if (stage === 'zero2') expect(p.grads, 'zero2 + offload: gradients only in the bucket buffers').toBe(0);
          expect(Math.abs(p.host_optimizer! - (8 * PSI) / 2)).toBeLessThan(8 * 64 * 28);
          expect(Math.abs(p.host_params! - (4 * PSI) / 2)).toBeLessThan(4 * 64 * 28);
        }
      }
    },
    LONG,
  );

  it(
    'gradient accumulation over 4 micro-batches equals one step on the whole batch',
    () => {
      expectSameTraining(train('accum', ['--micro-batches', '4']), single, 'single device, 4 micro-batches', { steps: STEPS });
      expectSameTraining(
        train('ddp-accum', ['--strategy', 'ddp', '--world', '2', '--micro-batches', '2']),
        single,
        'ddp world 2, 2 micro-batches each',
        { steps: STEPS },
      );
    },
    LONG,
  );
});

function wholeModelConfig(): string {
  const file = path.join(root, 'whole.json');
  if (!existsSync(file)) writeFileSync(file, JSON.stringify({ parallel: { first_bucket_mb: 1000 } }));
  return file;
}
