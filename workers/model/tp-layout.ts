// How Megatron's tensor parallelism splits each GPT-2 parameter over a group of T ranks, and the
// host-side shard/unshard of a full tensor (initialisation, checkpoints, resume). Names stay
// nanoGPT's; only the local shapes change. hs = C/NH; rank r of T owns heads r*NH/T ..
//   wte (V, C)              vocab-parallel: rows [r*Vp/T, (r+1)*Vp/T) of the vocabulary padded to
//                           Vp (a multiple of T, Megatron's make-vocab-size-divisible-by; of 4T at
//                           16-bit storage, whose kernels read 4 elements at a time: vocabAlign);
//                           padding rows are 0
//   c_attn.weight (3C, C)   column-parallel: the q, k and v rows of its heads -> (3C/T, C); c_attn.bias likewise
//   attn.c_proj.weight (C, C)   row-parallel: the input columns of its heads -> (C, C/T)
//   mlp.c_fc.weight (4C, C)     column-parallel: rows [r*4C/T, ..) -> (4C/T, C); c_fc.bias likewise
//   mlp.c_proj.weight (C, 4C)   row-parallel: columns [r*4C/T, ..) -> (C, 4C/T)
//   everything else (wpe, layernorms, row-parallel biases) is replicated on every rank
import { paddedVocab } from '../../common/padding.js';
import { type GptConfig, type ParamSpec, paramSpecs } from './config.js';
import { SplitMix32 } from '../data/prng.js';

export { shardKind } from '../../common/model-layout.js';

// the vocabulary's padding rule (vocabAlign, paddedVocab) lives in common/padding.ts, which the
// predictions of model-state bytes share
export { paddedVocab, vocabAlign } from '../../common/padding.js';

/** First id and row count of rank r's vocabulary shard. */
export function vocabShard(V: number, T: number, r: number, align = 1): { vStart: number; Vl: number } {
  const Vl = paddedVocab(V, T, align) / T;
  return { vStart: r * Vl, Vl };
}

/** (rows, cols) of a tensor: vectors are (n, 1). */
const dims = (shape: readonly number[]): [number, number] => [shape[0]!, shape[1] ?? 1];

/** The parameters one rank of T holds, in the single-device order, with their local shapes (wte's rows padded: vocabAlign). */
export function tpParamSpecs(c: GptConfig, T: number, align = 1): ParamSpec[] {
  return paramSpecs(c).map((s) => {
    const [R, K] = dims(s.shape);
    const local = (rows: number, cols: number) => (s.shape.length === 1 ? [rows] : [rows, cols]);
    if (s.kind === 'vocab') return { ...s, shape: local(paddedVocab(R, T, align) / T, K) };
    if (s.kind === 'qkv-rows' || s.kind === 'rows') return { ...s, shape: local(R / T, K) };
    if (s.kind === 'cols') return { ...s, shape: [R, K / T] };
    return s;
  });
}

/** Rank r's shard of a full tensor (a copy). */
export function shardTensor(spec: ParamSpec, full: Float32Array, T: number, r: number, align = 1): Float32Array {
  const [R, K] = dims(spec.shape);
  switch (spec.kind) {
    case 'replicated':
      return full.slice();
    case 'vocab': {
      const { vStart, Vl } = vocabShard(R, T, r, align);
      const out = new Float32Array(Vl * K); // rows past V stay 0 (padding)
      const end = Math.min(R, vStart + Vl);
      if (end > vStart) out.set(full.subarray(vStart * K, end * K));
      return out;
    }
    case 'rows':
      return full.slice((r * R * K) / T, ((r + 1) * R * K) / T);
    case 'qkv-rows': {
      // three sections (q, k, v) of C rows each; rank r takes the same head rows of each
      const C = R / 3;
      const w = C / T;
      const out = new Float32Array(3 * w * K);
      for (let s = 0; s < 3; s++) out.set(full.subarray((s * C + r * w) * K, (s * C + (r + 1) * w) * K), s * w * K);
      return out;
    }
    case 'cols': {
      const w = K / T;
      const out = new Float32Array(R * w);
      for (let i = 0; i < R; i++) out.set(full.subarray(i * K + r * w, i * K + (r + 1) * w), i * w);
      return out;
    }
  }
}

/** The full tensor from every rank's shard (rank order); replicated tensors are taken from rank 0. */
export function unshardTensor(spec: ParamSpec, shards: readonly Float32Array[], T: number, align = 1): Float32Array {
  const [R, K] = dims(spec.shape);
  const full = new Float32Array(R * K);
  switch (spec.kind) {
    case 'replicated':
      full.set(shards[0]!);
      break;
    case 'vocab': {
      for (let r = 0; r < T; r++) {
        const { vStart, Vl } = vocabShard(R, T, r, align);
        const rows = Math.max(0, Math.min(Vl, R - vStart));
        full.set(shards[r]!.subarray(0, rows * K), vStart * K);
      }
      break;
    }
    case 'rows':
      for (let r = 0; r < T; r++) full.set(shards[r]!, (r * R * K) / T);
      break;
    case 'qkv-rows': {
      const C = R / 3;
      const w = C / T;
      for (let r = 0; r < T; r++)
        for (let s = 0; s < 3; s++) full.set(shards[r]!.subarray(s * w * K, (s + 1) * w * K), (s * C + r * w) * K);
      break;
    }
    case 'cols': {
      const w = K / T;
      for (let r = 0; r < T; r++) for (let i = 0; i < R; i++) full.set(shards[r]!.subarray(i * w, (i + 1) * w), i * K + r * w);
      break;
    }
  }
  return full;
}

/** Rank r's shards of a whole model (parameters or optimizer moments), by name. */
export function shardModel(c: GptConfig, full: Map<string, Float32Array>, T: number, r: number, align = 1): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const s of paramSpecs(c)) {
    const v = full.get(s.name);
    if (!v) throw new Error(`missing tensor ${s.name}`);
    out.set(s.name, shardTensor(s, v, T, r, align));
  }
  return out;
}

/** Megatron's divisibility rules, as errors naming the field. */
export function validateTensorParallel(c: GptConfig, T: number): void {
  if (!Number.isInteger(T) || T < 1) throw new Error(`parallel.tp must be a positive integer, got ${T}`);
  if (c.n_head % T !== 0)
    throw new Error(
      `model.n_head (${c.n_head}) must be divisible by parallel.tp (${T}): each rank computes n_head/tp whole attention heads; pick --tp among the divisors of ${c.n_head}`,
    );
  if ((4 * c.d_model) % T !== 0)
    throw new Error(`model.d_model (${c.d_model}) x 4 must be divisible by parallel.tp (${T}) to split the MLP`);
}

/**
 * The whole model's initial values on the host, GPT-2's init (common/model-layout.ts), which every rank then
 * shards or takes its stage of: every strategy starts from the single-device weights.
 */
export function initialFullParams(c: GptConfig, seed: number): Map<string, Float32Array> {
  const rng = new SplitMix32(seed);
  const out = new Map<string, Float32Array>();
  for (const spec of paramSpecs(c)) {
    const data = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
    const init = spec.init;
    if (init.kind === 'normal') for (let i = 0; i < data.length; i++) data[i] = rng.normal() * init.std;
    else data.fill(init.value);
    out.set(spec.name, data);
  }
  return out;
}
