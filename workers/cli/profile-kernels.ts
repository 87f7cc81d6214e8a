// The kernels of one training step, timed on one adapter at one model's shapes: what the
// advisor's cost model reads a device's throughput from (`shardwise profile`). Each case is the
// launch the model prepares (workers/model) at the same sizes, run back to back in one command
// buffer; its time is the median over a few rounds, per launch.
//
// FLOPs are the arithmetic the op does (a multiply-add is 2); elementwise ops count their
// nominal operations per element (stated per case). Bytes are what one launch reads and writes
// at least once (4 per float32): the roofline's memory side.
import type { KernelTiming } from '../../common/advisor/profile.js';
import { gptParamCount } from '../../common/model-params.js';
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import type { ProfileShape } from '../protocol/profile-shape.js';
import { adamw } from '../kernels/adamw.js';
import { attentionBackward, attentionForward } from '../kernels/attention.js';
import { softmaxCrossEntropy } from '../kernels/crossentropy.js';
import { encoderForward } from '../kernels/encoder.js';
import { geluBackward, geluForward } from '../kernels/gelu.js';
import { layernormBackward, layernormForward } from '../kernels/layernorm.js';
import { matmul } from '../kernels/matmul.js';
import { median } from '../../common/stats.js';

/** the model's dimensions in the usual letters (the profile request's shape, less its name) */
export type KernelShape = Omit<ProfileShape, 'name'>;

export interface TimingBudget {
  /** launches per round (back to back in one command buffer) are grown until a round takes this long */
  roundMs: number;
  /** rounds per case; the median round is kept */
  rounds: number;
  /** epoch ms after which each case is timed once only (the calibration has a fixed limit) */
  deadline?: number;
}

/** One launch of a training step at one model's sizes, as the model prepares it. */
export interface Case {
  op: string;
  shape: string;
  flops: number;
  bytes: number;
  prepare(rt: Runtime, t: (name: string, numel: number) => GpuTensor): Dispatch[];
}

const F = 4; // bytes per float32

/** Ψ of the GPT at these sizes (common/model-params.ts) */
const params = (s: KernelShape): number => gptParamCount({ n_layer: s.L, d_model: s.C, block_size: s.T }, s.V);

function matmulCase(op: string, M: number, N: number, K: number, o: { transA?: boolean; transB?: boolean; bias?: boolean } = {}): Case {
  return {
    op: 'matmul',
    shape: `${op}: M=${M} N=${N} K=${K}${o.transA ? ' tA' : ''}${o.transB ? ' tB' : ''}`,
    flops: 2 * M * N * K + (o.bias ? M * N : 0),
    bytes: F * (M * K + K * N + M * N + (o.bias ? N : 0)),
    prepare: (rt, t) =>
      matmul(rt, {
        out: t('out', M * N),
        a: t('a', M * K),
        b: t('b', K * N),
        bias: o.bias ? t('bias', N) : null,
        M,
        N,
        K,
        transA: o.transA,
        transB: o.transB,
      }),
  };
}

/** the launches of one training step at these shapes, forward and backward, and the optimizer's */
export function stepCases(s: KernelShape): Case[] {
  const { B, T, C, NH, V } = s;
  const N = B * T;
  return [
    {
      op: 'encoder',
      shape: `B=${B} T=${T} C=${C}`,
      flops: N * C, // token row + position row
      bytes: F * (N + 3 * N * C),
      prepare: (rt, t) =>
        encoderForward(rt, { out: t('out', N * C), idx: t('idx', N), wte: t('wte', V * C), wpe: t('wpe', T * C), B, T, C }),
    },
    {
      op: 'layernorm',
      shape: `forward N=${N} C=${C}`,
      flops: 8 * N * C, // mean, variance (2), normalise (2), scale and shift (2), and the sums
      bytes: F * (2 * N * C + 2 * C + 2 * N),
      prepare: (rt, t) =>
        layernormForward(rt, {
          out: t('out', N * C),
          mean: t('mean', N),
          rstd: t('rstd', N),
          inp: t('inp', N * C),
          weight: t('w', C),
          bias: t('b', C),
          N,
          C,
        }),
    },
    matmulCase('qkv', N, 3 * C, C, { transB: true, bias: true }),
    {
      op: 'attention',
      shape: `forward B=${B} NH=${NH} T=${T} hs=${C / NH}`,
      // scores Q·Kᵀ and A·V: 2·2·B·T·T·C; softmax ~5 per score
      flops: 4 * B * T * T * C + 5 * B * NH * T * T,
      bytes: F * (3 * N * C + B * NH * T * T + N * C),
      prepare: (rt, t) =>
        attentionForward(rt, { out: t('out', N * C), att: t('att', B * NH * T * T), qkv: t('qkv', 3 * N * C), B, T, C, NH }),
    },
    matmulCase('attn proj', N, C, C, { transB: true, bias: true }),
    matmulCase('fc', N, 4 * C, C, { transB: true, bias: true }),
    {
      op: 'gelu',
      shape: `forward n=${4 * N * C}`,
      flops: 10 * 4 * N * C, // tanh approximation: cube, fma, tanh, scale
      bytes: F * 2 * 4 * N * C,
      prepare: (rt, t) => geluForward(rt, { out: t('out', 4 * N * C), inp: t('inp', 4 * N * C), n: 4 * N * C }),
    },
    matmulCase('mlp proj', N, C, 4 * C, { transB: true, bias: true }),
    matmulCase('lm head', N, V, C, { transB: true }),
    {
      op: 'crossentropy',
      shape: `softmax+grad N=${N} V=${V}`,
      flops: 5 * N * V, // max, exp, sum, normalise, gradient
      bytes: F * (2 * N * V + 2 * N),
      prepare: (rt, t) => {
        const logits = t('logits', N * V);
        return softmaxCrossEntropy(rt, {
          losses: t('losses', N),
          logits,
          dlogits: logits,
          targets: t('targets', N),
          N,
          V,
          dlossScale: 1 / N,
        });
      },
    },
    // backward: the input gradient (dout @ W) and the weight gradient (doutᵀ @ inp) of the widest linears
    matmulCase('lm head dX', N, C, V),
    matmulCase('lm head dW', V, C, N, { transA: true }),
    matmulCase('fc dX', N, C, 4 * C),
    matmulCase('fc dW', 4 * C, C, N, { transA: true }),
    {
      op: 'gelu',
      shape: `backward n=${4 * N * C}`,
      flops: 14 * 4 * N * C,
      bytes: F * 3 * 4 * N * C,
      prepare: (rt, t) => {
        const d = t('dout', 4 * N * C);
        return geluBackward(rt, { dinp: d, dout: d, inp: t('inp', 4 * N * C), n: 4 * N * C });
      },
    },
    {
      op: 'attention',
      shape: `backward B=${B} NH=${NH} T=${T} hs=${C / NH}`,
      flops: 8 * B * T * T * C + 5 * B * NH * T * T, // twice the forward's matmuls
      bytes: F * (3 * N * C + B * NH * T * T + N * C + 3 * N * C),
      prepare: (rt, t) =>
        attentionBackward(rt, {
          dqkv: t('dqkv', 3 * N * C),
          dout: t('dout', N * C),
          qkv: t('qkv', 3 * N * C),
          att: t('att', B * NH * T * T),
          B,
          T,
          C,
          NH,
        }),
    },
    {
      op: 'layernorm',
      shape: `backward N=${N} C=${C}`,
      flops: 14 * N * C,
      bytes: F * (3 * N * C + 3 * C + 2 * N),
      prepare: (rt, t) =>
        layernormBackward(rt, {
          dinp: t('dinp', N * C),
          dweight: t('dw', C),
          dbias: t('db', C),
          dout: t('dout', N * C),
          inp: t('inp', N * C),
          weight: t('w', C),
          mean: t('mean', N),
          rstd: t('rstd', N),
          N,
          C,
        }),
    },
    {
      op: 'adamw',
      shape: `n=${params(s)}`,
      flops: 12 * params(s), // two moments, bias corrections, the update with decay
      bytes: F * 7 * params(s), // params, m, v read and written, grads read
      prepare: (rt, t) => {
        const n = params(s);
        return adamw(rt, { params: t('p', n), grads: t('g', n), m: t('m', n), v: t('v', n), n }).dispatches;
      },
    },
  ];
}

/** A case's buffers allocated and its launch prepared on rt; `free` gives the buffers back. */
export function prepareCase(rt: Runtime, c: Case): { dispatches: Dispatch[]; free(): void } {
  const made: GpuTensor[] = [];
  const t = (name: string, numel: number) => {
    const x = rt.allocator.tensor(`profile.${name}`, 'workspace', [Math.max(1, numel)]);
    made.push(x);
    return x;
  };
  const free = () => {
    for (const x of made) rt.allocator.free(x);
  };
  try {
    return { dispatches: c.prepare(rt, t), free };
  } catch (e) {
    free();
    throw e;
  }
}

/** Time one case: compile and warm up, grow the launches per round to budget.roundMs, keep the median round. */
async function timeCase(rt: Runtime, c: Case, budget: TimingBudget): Promise<number> {
  const { dispatches: d, free } = prepareCase(rt, c);
  try {
    rt.run(d);
    await rt.sync(); // compile, first touch
    let reps = 1;
    const perLaunch: number[] = [];
    for (let round = 0; round < budget.rounds; round++) {
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) rt.run(d);
      await rt.sync();
      const ms = performance.now() - t0;
      perLaunch.push(ms / reps);
      if (budget.deadline !== undefined && Date.now() > budget.deadline) break;
      if (ms < budget.roundMs && round === 0) reps = Math.min(256, Math.max(1, Math.ceil((reps * budget.roundMs) / Math.max(ms, 0.01))));
    }
    return median(perLaunch);
  } finally {
    free();
  }
}

/** Every kernel of a training step at these shapes, timed on rt's adapter. */
export async function profileKernels(rt: Runtime, s: KernelShape, budget: TimingBudget): Promise<KernelTiming[]> {
  const out: KernelTiming[] = [];
  for (const c of stepCases(s)) {
    const ms = await timeCase(rt, c, budget);
    out.push({ op: c.op, shape: c.shape, flops: c.flops, bytes: c.bytes, ms: Math.max(ms, 1e-6) });
  }
  return out;
}

/** Host -> device and device -> host copy rates in GB/s, `bytes` at a time, median of `rounds`. */
export async function profileCopies(rt: Runtime, bytes: number, rounds: number): Promise<{ h2d_gbps: number; d2h_gbps: number }> {
  const n = Math.max(1, Math.floor(bytes / F));
  const t = rt.allocator.tensor('profile.copy', 'workspace', [n]);
  const host = new Float32Array(n).fill(1);
  const h2d: number[] = [];
  const d2h: number[] = [];
  try {
    rt.write(t, host);
    await rt.read(t, 1); // first touch of both paths
    for (let r = 0; r < rounds; r++) {
      let t0 = performance.now();
      rt.write(t, host);
      await rt.sync();
      h2d.push(performance.now() - t0);
      t0 = performance.now();
      await rt.read(t, n, 0, host);
      d2h.push(performance.now() - t0);
    }
  } finally {
    rt.allocator.free(t);
  }
  const gbps = (ms: number) => (n * F) / (Math.max(ms, 1e-3) * 1e6);
  return { h2d_gbps: gbps(median(h2d)), d2h_gbps: gbps(median(d2h)) };
}
