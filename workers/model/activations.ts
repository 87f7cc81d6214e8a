// Activation buffers of one micro-batch (B rows of T tokens), allocated once per model
// instance (llm.c style) under the 'activations' category; backward scratch under
// 'workspace'. With activation checkpointing every block shares one set of internals and
// keeps only its input (the residual stream), recomputing the rest in backward. Under tensor
// parallelism of TP ranks the split tensors hold this rank's columns (own heads, own MLP
// columns, own vocabulary rows); with partitioned checkpointing (DeepSpeed's
// partition_activations) each block input is kept as this rank's 1/TP slice and two full
// buffers alternate as the working residual stream.
// Mixed precision stores the activations and their gradients at the run's 16-bit precision;
// what the kernels keep in f32 stays f32: layernorm statistics, attention probabilities, the
// per-token losses (workers/kernels: each launcher says which of its tensors are compute tensors).
import type { GpuTensor } from '../gpu/allocator.js';
import type { StoragePrecision } from '../gpu/precision.js';
import type { Runtime } from '../gpu/runtime.js';
import type { GptConfig } from './config.js';
import type { StageRange } from './stage.js';
import { vocabAlign, vocabShard } from './tp-layout.js';
import type { RowStats } from './vocab-parallel.js';

export interface BlockActs {
  ln1: GpuTensor; // (B,T,C)
  ln1Mean: GpuTensor; // (B,T)
  ln1Rstd: GpuTensor; // (B,T)
  qkv: GpuTensor; // (B,T,3C/TP)
  att: GpuTensor; // (B,NH/TP,T,T)
  atty: GpuTensor; // (B,T,C/TP)
  res2: GpuTensor; // (B,T,C) residual after attention
  ln2: GpuTensor; // (B,T,C)
  ln2Mean: GpuTensor; // (B,T)
  ln2Rstd: GpuTensor; // (B,T)
  fch: GpuTensor; // (B,T,4C/TP)
  fchGelu: GpuTensor; // (B,T,4C/TP)
}

export interface Activations {
  /** residual stream: resid[0] = embeddings, resid[l+1] = output of block l; (B,T,C) each */
  resid: GpuTensor[];
  /** partitioned checkpointing: this rank's slice of each block input (B*T*C/TP); empty otherwise */
  slices: GpuTensor[];
  blocks: BlockActs[];
  lnf: GpuTensor; // (B,T,C)
  lnfMean: GpuTensor; // (B,T)
  lnfRstd: GpuTensor; // (B,T)
  logits: GpuTensor; // (B,T,Vl), Vl = V/TP padded; holds dlogits after the loss
  losses: GpuTensor; // (B,T)
  idx: GpuTensor; // (B,T) u32 token ids
  targets: GpuTensor; // (B,T) u32
}

export interface Scratch {
  dresid: GpuTensor; // (B,T,C) gradient of the residual stream, updated in place block by block
  dln: GpuTensor; // (B,T,C)
  datty: GpuTensor; // (B,T,C/TP)
  dqkv: GpuTensor; // (B,T,3C/TP)
  dfch: GpuTensor; // (B,T,4C/TP)
  /** TP > 1: the row-parallel linears' partial products (B,T,C), all-reduced in place */
  partial: GpuTensor | null;
  /** TP > 1: the vocab-parallel cross-entropy's row statistics */
  rowStats: RowStats | null;
}

/** A tensor-parallel rank's place: TP ranks, this one's index, and whether checkpointed inputs are partitioned. */
export interface TpShape {
  size: number;
  rank: number;
  partitioned: boolean;
}

function blockActs(rt: Runtime, name: string, B: number, T: number, c: GptConfig, TP: number, p: StoragePrecision): BlockActs {
  const C = c.d_model;
  // t: a compute tensor (at p); f: an f32 one (statistics, probabilities)
  const t = (n: string, shape: number[]) => rt.allocator.tensor(`${name}.${n}`, 'activations', shape, p);
  const f = (n: string, shape: number[]) => rt.allocator.tensor(`${name}.${n}`, 'activations', shape);
  return {
    ln1: t('ln1', [B, T, C]),
    ln1Mean: f('ln1_mean', [B, T]),
    ln1Rstd: f('ln1_rstd', [B, T]),
    qkv: t('qkv', [B, T, (3 * C) / TP]),
    att: f('att', [B, c.n_head / TP, T, T]),
    atty: t('atty', [B, T, C / TP]),
    res2: t('res2', [B, T, C]),
    ln2: t('ln2', [B, T, C]),
    ln2Mean: f('ln2_mean', [B, T]),
    ln2Rstd: f('ln2_rstd', [B, T]),
    fch: t('fch', [B, T, (4 * C) / TP]),
    fchGelu: t('fch_gelu', [B, T, (4 * C) / TP]),
  };
}

/** Arrays stay indexed by global layer; entries of blocks another stage holds are left empty. */
export function allocateActivations(
  rt: Runtime,
  c: GptConfig,
  B: number,
  T: number,
  checkpointing: boolean,
  stage: StageRange,
  tp: TpShape,
  prefix = '',
  /** storage of the compute tensors (the residual stream, layer outputs, logits) */
  precision: StoragePrecision = 'fp32',
): Activations {
  const C = c.d_model;
  const { from, to, first, last } = stage;
  const t = (n: string, shape: number[]) => rt.allocator.tensor(`${prefix}${n}`, 'activations', shape, precision);
  const f = (n: string, shape: number[]) => rt.allocator.tensor(`${prefix}${n}`, 'activations', shape);
  const none = undefined as unknown as GpuTensor; // a buffer another stage holds
  const resid = new Array<GpuTensor>(c.n_layer + 1).fill(none);
  const slices: GpuTensor[] = [];
  if (tp.partitioned) {
    const bufs = [t('resid.even', [B, T, C]), t('resid.odd', [B, T, C])];
    for (let l = from; l <= to; l++) resid[l] = bufs[l % 2]!;
    for (let l = from; l < to; l++) slices[l] = t(`resid.${l}.slice${tp.rank}`, [(B * T * C) / tp.size]);
  } else for (let l = from; l <= to; l++) resid[l] = t(`resid.${l}`, [B, T, C]);
  const shared = checkpointing ? blockActs(rt, `${prefix}block.shared`, B, T, c, tp.size, precision) : null;
  const blocks = Array.from({ length: c.n_layer }, (_, l) =>
    l >= from && l < to ? (shared ?? blockActs(rt, `${prefix}block.${l}`, B, T, c, tp.size, precision)) : (none as unknown as BlockActs),
  );
  const { Vl } = vocabShard(c.vocab_size, tp.size, tp.rank, vocabAlign(precision));
  return {
    resid,
    slices,
    blocks,
    lnf: last ? t('lnf', [B, T, C]) : none,
    lnfMean: last ? f('lnf_mean', [B, T]) : none,
    lnfRstd: last ? f('lnf_rstd', [B, T]) : none,
    logits: last ? t(tp.size > 1 ? `logits.shard${tp.rank}` : 'logits', [B, T, Vl]) : none,
    losses: last ? f('losses', [B, T]) : none,
    idx: first ? f('idx', [B, T]) : none,
    targets: last ? f('targets', [B, T]) : none,
  };
}

export function allocateScratch(
  rt: Runtime,
  c: GptConfig,
  B: number,
  T: number,
  TP: number,
  precision: StoragePrecision = 'fp32',
): Scratch {
  const C = c.d_model;
  const t = (n: string, shape: number[]) => rt.allocator.tensor(n, 'workspace', shape, precision);
  const f = (n: string, shape: number[]) => rt.allocator.tensor(n, 'workspace', shape); // row statistics stay f32
  return {
    dresid: t('dresid', [B, T, C]),
    dln: t('dln', [B, T, C]),
    datty: t('datty', [B, T, C / TP]),
    dqkv: t('dqkv', [B, T, (3 * C) / TP]),
    dfch: t('dfch', [B, T, (4 * C) / TP]),
    partial: TP > 1 ? t('tp.partial', [B, T, C]) : null,
    rowStats:
      TP > 1 ? { rowMax: f('ce.row_max', [B, T]), rowSum: f('ce.row_sum', [B, T]), targetLogit: f('ce.target_logit', [B, T]) } : null,
  };
}
