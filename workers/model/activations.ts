// Activation buffers of one micro-batch (B rows of T tokens), allocated once per model
// instance (llm.c style) under the 'activations' category; backward scratch under
// 'workspace'. With activation checkpointing every block shares one set of internals and
// keeps only its input (the residual stream), recomputing the rest in backward.
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import type { GptConfig } from './config.js';

export interface BlockActs {
  ln1: GpuTensor; // (B,T,C)
  ln1Mean: GpuTensor; // (B,T)
  ln1Rstd: GpuTensor; // (B,T)
  qkv: GpuTensor; // (B,T,3C)
  att: GpuTensor; // (B,NH,T,T)
  atty: GpuTensor; // (B,T,C)
  res2: GpuTensor; // (B,T,C) residual after attention
  ln2: GpuTensor; // (B,T,C)
  ln2Mean: GpuTensor; // (B,T)
  ln2Rstd: GpuTensor; // (B,T)
  fch: GpuTensor; // (B,T,4C)
  fchGelu: GpuTensor; // (B,T,4C)
}

export interface Activations {
  /** residual stream: resid[0] = embeddings, resid[l+1] = output of block l; (B,T,C) each */
  resid: GpuTensor[];
  blocks: BlockActs[];
  lnf: GpuTensor; // (B,T,C)
  lnfMean: GpuTensor; // (B,T)
  lnfRstd: GpuTensor; // (B,T)
  logits: GpuTensor; // (B,T,V); holds dlogits after the fused loss kernel
  losses: GpuTensor; // (B,T)
  idx: GpuTensor; // (B,T) u32 token ids
  targets: GpuTensor; // (B,T) u32
}

export interface Scratch {
  dresid: GpuTensor; // (B,T,C) gradient of the residual stream, updated in place block by block
  dln: GpuTensor; // (B,T,C)
  datty: GpuTensor; // (B,T,C)
  dqkv: GpuTensor; // (B,T,3C)
  dfch: GpuTensor; // (B,T,4C)
}

function blockActs(rt: Runtime, name: string, B: number, T: number, c: GptConfig): BlockActs {
  const C = c.d_model;
  const t = (n: string, shape: number[]) => rt.allocator.tensor(`${name}.${n}`, 'activations', shape);
  return {
    ln1: t('ln1', [B, T, C]),
    ln1Mean: t('ln1_mean', [B, T]),
    ln1Rstd: t('ln1_rstd', [B, T]),
    qkv: t('qkv', [B, T, 3 * C]),
    att: t('att', [B, c.n_head, T, T]),
    atty: t('atty', [B, T, C]),
    res2: t('res2', [B, T, C]),
    ln2: t('ln2', [B, T, C]),
    ln2Mean: t('ln2_mean', [B, T]),
    ln2Rstd: t('ln2_rstd', [B, T]),
    fch: t('fch', [B, T, 4 * C]),
    fchGelu: t('fch_gelu', [B, T, 4 * C]),
  };
}

/**
 * A pipeline stage's share: blocks [from, to), the embedding's input on the first stage and the
 * head's buffers on the last. Arrays stay indexed by global layer; other entries are left empty.
 */
export interface StageRange {
  from: number;
  to: number;
  first: boolean;
  last: boolean;
}

export function allocateActivations(
  rt: Runtime,
  c: GptConfig,
  B: number,
  T: number,
  checkpointing: boolean,
  stage?: StageRange,
  prefix = '',
): Activations {
  const C = c.d_model;
  const { from, to, first, last } = stage ?? { from: 0, to: c.n_layer, first: true, last: true };
  const t = (n: string, shape: number[]) => rt.allocator.tensor(`${prefix}${n}`, 'activations', shape);
  const none = undefined as unknown as GpuTensor; // a buffer another stage holds
  const resid = Array.from({ length: c.n_layer + 1 }, (_, l) => (l >= from && l <= to ? t(`resid.${l}`, [B, T, C]) : none));
  const shared = checkpointing ? blockActs(rt, `${prefix}block.shared`, B, T, c) : null;
  const blocks = Array.from({ length: c.n_layer }, (_, l) =>
    l >= from && l < to ? (shared ?? blockActs(rt, `${prefix}block.${l}`, B, T, c)) : (none as unknown as BlockActs),
  );
  return {
    resid,
    blocks,
    lnf: last ? t('lnf', [B, T, C]) : none,
    lnfMean: last ? t('lnf_mean', [B, T]) : none,
    lnfRstd: last ? t('lnf_rstd', [B, T]) : none,
    logits: last ? t('logits', [B, T, c.vocab_size]) : none,
    losses: last ? t('losses', [B, T]) : none,
    idx: first ? t('idx', [B, T]) : none,
    targets: last ? t('targets', [B, T]) : none,
  };
}

export function allocateScratch(rt: Runtime, c: GptConfig, B: number, T: number): Scratch {
  const C = c.d_model;
  const t = (n: string, shape: number[]) => rt.allocator.tensor(n, 'workspace', shape);
  return {
    dresid: t('dresid', [B, T, C]),
    dln: t('dln', [B, T, C]),
    datty: t('datty', [B, T, C]),
    dqkv: t('dqkv', [B, T, 3 * C]),
    dfch: t('dfch', [B, T, 4 * C]),
  };
}
