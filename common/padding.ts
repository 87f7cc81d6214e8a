// The engine's padding rules, in one place: the rank engines lay their tensors out with them
// (workers/model/params.ts, tp-layout.ts, workers/parallel/zero1.ts) and the predictions count
// with them (common/model-state.ts, common/advisor/memory.ts), so a predicted byte count is the
// allocator's, padding included.
//   slots      every tensor of a flat layout (parameters, gradients, the optimizer's arenas) starts
//              on a 256-byte boundary (WebGPU's minStorageBufferOffsetAlignment): 64 elements at
//              fp32, 128 at 16 bits; ZeRO's shards start on a slot too
//   vocabulary wte's rows are padded to a multiple of the TP size (Megatron's
//              make-vocab-size-divisible-by), and of 4 x TP at 16-bit storage, whose kernels read
//              4 elements at a time (the logits' rows, the LM head's matmuls); padding rows are 0
import { computeBytes, type Precision } from './precision.js';

/** Bytes of one slot of a flat layout (workers/gpu/allocator.ts aligns every slice to it). */
export const SLOT_BYTES = 256;

/** Elements of one slot at this storage precision: 64 at fp32, 128 at 16 bits. */
export const slotElemsAt = (p: Precision = 'fp32'): number => SLOT_BYTES / computeBytes(p);

/** Elements of an fp32 slot (the layout of every fp32 run). */
export const SLOT_ELEMS = slotElemsAt('fp32');

/** Elements a tensor of `numel` takes in a flat layout at this precision: whole slots, at least one. */
export function slotElems(numel: number, p: Precision = 'fp32'): number {
  const slot = slotElemsAt(p);
  return Math.max(slot, Math.ceil(numel / slot) * slot);
}

/** ZeRO's shard bounds of a flat layout of F elements over N ranks, each start on a slot (`slot` elements: slotElemsAt). */
export function shardBounds(F: number, N: number, slot = SLOT_ELEMS): number[] {
  const per = Math.ceil(F / N / slot) * slot;
  return Array.from({ length: N + 1 }, (_, r) => Math.min(F, r * per));
}

/**
 * The multiple each TP rank's vocabulary rows are padded to: 1 at fp32 (its layout and bits stay
 * as they were); 4 at 16-bit storage, whose kernels read 4 elements at a time.
 */
export function vocabAlign(p: Precision): number {
  return p === 'fp32' ? 1 : 4;
}

/** Vocabulary rows padded up to a multiple of the TP size times `align` (padding ids never occur in the data). */
export function paddedVocab(V: number, T: number, align = 1): number {
  return Math.ceil(V / (T * align)) * T * align;
}
