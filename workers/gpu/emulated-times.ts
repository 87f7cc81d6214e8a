// The emulated device's time for each layer pass (emulated-device.ts), from a stated
// TFLOP/s or from a profile measured on a real GPU. Dimensions as everywhere: micro-batch rows
// B, sequence T, width C, vocabulary V; a tensor-parallel rank computes 1/TP of each matmul.
//
// FLOPs of one forward (multiply-add = 2), as the kernels compute them (full T x T scores):
//   block: qkv 2·N·C·3C + proj 2·N·C·C + fc 2·N·C·4C + fc_proj 2·N·4C·C = 24·N·C²,
//          attention scores 2·N·T·C + weighted values 2·N·T·C = 4·N·T·C        (N = B·T)
//   head:  LM head 2·N·C·V;   embedding: a gather, no FLOPs (its time is overhead_ms)
// Backward is twice its forward; with activation checkpointing a block's backward also
// recomputes its forward. Layernorms, GELU and softmax are memory-bound and left out: a
// TFLOP/s figure measured on whole steps (bench/device/RESULTS.md: GPT-2 124M at ~4.3 TFLOP/s
// on an H200 with these kernels) already includes them.
import type { DeviceProfile, EmulatedShape } from '../protocol/emulate.js';

export interface EmulatedDims {
  /** micro-batch rows and sequence length (the real run's) */
  B: number;
  T: number;
  /** the timed shape's width, heads and vocabulary */
  C: number;
  V: number;
  /** tensor-parallel group size (1 without) */
  tp: number;
  checkpointing: boolean;
}

export interface PassTimes {
  forward: number;
  backward: number;
}

export interface LayerTimes {
  embedding: PassTimes;
  block: PassTimes;
  head: PassTimes;
  /** the optimizer step (0: not emulated) */
  optimizer: number;
  /** how outputs name the emulated device */
  device: string;
}

export function blockForwardFlops(d: Pick<EmulatedDims, 'B' | 'T' | 'C'>): number {
  const N = d.B * d.T;
  return 24 * N * d.C * d.C + 4 * N * d.T * d.C;
}

export function headForwardFlops(d: Pick<EmulatedDims, 'B' | 'T' | 'C' | 'V'>): number {
  return 2 * d.B * d.T * d.C * d.V;
}

/** Layer times at `tflops` sustained, plus a fixed `overheadMs` per layer pass. */
export function timesFromTflops(d: EmulatedDims, tflops: number, overheadMs = 0, optimizerMs = 0): LayerTimes {
  const ms = (flops: number) => (flops / d.tp / (tflops * 1e12)) * 1e3 + overheadMs;
  const block = blockForwardFlops(d);
  const head = headForwardFlops(d);
  return {
    embedding: { forward: ms(0), backward: ms(0) },
    block: { forward: ms(block), backward: ms((d.checkpointing ? 3 : 2) * block) },
    head: { forward: ms(head), backward: ms(2 * head) },
    optimizer: optimizerMs,
    device: `${tflops} TFLOP/s`,
  };
}

/** A profile's layer times, scaled from its tokens to the micro-batch's (B·T), plus `overheadMs` per pass. */
export function timesFromProfile(
  d: Pick<EmulatedDims, 'B' | 'T' | 'tp' | 'checkpointing'>,
  p: DeviceProfile,
  overheadMs = 0,
  optimizerMs?: number,
): LayerTimes {
  const k = (d.B * d.T) / p.tokens / d.tp;
  const pass = (x: { forward_ms: number; backward_ms: number }, recompute = false) => ({
    forward: x.forward_ms * k + overheadMs,
    backward: (x.backward_ms + (recompute ? x.forward_ms : 0)) * k + overheadMs,
  });
  return {
    embedding: pass(p.layers.embedding),
    block: pass(p.layers.block, d.checkpointing),
    head: pass(p.layers.head),
    optimizer: optimizerMs ?? p.optimizer_ms ?? 0,
    device: p.device,
  };
}

/**
 * The device's sustained rate in FLOPs per ms: a block's forward FLOPs (its 1/TP share) over its
 * time less the launch overhead (timesFromTflops: the stated TFLOP/s; a profile: what its block
 * measured). Work outside the layers (a DDP communication hook's math) is timed at this rate.
 */
export function sustainedFlopsPerMs(t: LayerTimes, d: EmulatedDims, overheadMs = 0): number {
  const ms = t.block.forward - overheadMs;
  return ms > 0 ? blockForwardFlops(d) / d.tp / ms : 0; // 0: a profile whose block takes no time gives no rate
}

/** The time of one pass of the layer the model names `layer` ('embedding', 'block.<l>', 'head'). */
export function passTime(t: LayerTimes, kind: 'forward' | 'backward', layer: string): number {
  const of = layer === 'embedding' ? t.embedding : layer === 'head' ? t.head : t.block;
  return of[kind];
}

/** The dimensions to time: the emulated shape's width and vocabulary where one is given, else the model's. */
export function emulatedDims(
  model: { d_model: number; vocab_size: number },
  shape: EmulatedShape | undefined,
  run: { B: number; T: number; tp: number; checkpointing: boolean },
): EmulatedDims {
  return { ...run, C: shape?.d_model ?? model.d_model, V: shape?.vocab_size ?? model.vocab_size };
}
