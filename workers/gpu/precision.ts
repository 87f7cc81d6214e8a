// Storage precisions of device tensors. fp32 is the default of every tensor; bf16 and fp16 are
// mixed precision's compute copy (weights, gradients, activations): 2 bytes per element on the
// device, widened to f32 inside the kernels (workers/kernels/source.ts), which accumulate in f32.
// The host side converts with the same rounding the kernels use (common/half-float.ts: round to
// nearest even, overflow to infinity, NaN kept quiet).

import { bfloat16ToFloat, floatToBfloat16, floatToHalf, halfToFloat } from '../../common/half-float.js';

export type StoragePrecision = 'fp32' | 'bf16' | 'fp16';
export const STORAGE_PRECISIONS: readonly StoragePrecision[] = ['fp32', 'bf16', 'fp16'];

/** Bytes of one element stored at this precision. */
export function bytesPerElement(p: StoragePrecision): 2 | 4 {
  return p === 'fp32' ? 4 : 2;
}

/** Unit roundoff of the format (half the gap between 1 and the next value): the relative error bound of one rounding to nearest. */
export function unitRoundoff(p: StoragePrecision): number {
  return p === 'bf16' ? 2 ** -8 : p === 'fp16' ? 2 ** -11 : 2 ** -24;
}

/** The 16-bit encodings of float values (p must be bf16 or fp16). */
export function encode16(p: StoragePrecision, x: ArrayLike<number>): Uint16Array {
  if (p === 'fp32') throw new Error('encode16: fp32 has no 16-bit encoding; write the Float32Array as it is');
  const enc = p === 'bf16' ? floatToBfloat16 : floatToHalf;
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = enc(x[i]!);
  return out;
}

/** Float values of 16-bit encodings (exact: every bf16 and fp16 value is a float32). */
export function decode16(p: StoragePrecision, bits: Uint16Array): Float32Array {
  if (p === 'fp32') throw new Error('decode16: fp32 has no 16-bit encoding');
  const dec = p === 'bf16' ? bfloat16ToFloat : halfToFloat;
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = dec(bits[i]!);
  return out;
}

/** The values a tensor of precision p holds after storing x: x itself for fp32, else x rounded to the format. */
export function roundTo(p: StoragePrecision, x: ArrayLike<number>): Float32Array {
  return p === 'fp32' ? Float32Array.from(x) : decode16(p, encode16(p, x));
}
