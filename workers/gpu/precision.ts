// Storage precisions of device tensors. fp32 is the default of every tensor; bf16 and fp16 are
// mixed precision's compute copy (weights, gradients, activations): 2 bytes per element on the
// device, widened to f32 inside the kernels (workers/kernels/source.ts), which accumulate in f32.
// The host side converts with the same rounding the kernels use: round to nearest even, overflow
// to infinity, NaN kept (quiet).

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

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> bfloat16 bits (the upper half of the float32, rounded to nearest even). */
export function floatToBf16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0) return ((b >>> 16) | 0x40) & 0xffff; // NaN stays a (quiet) NaN
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToFloat(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

/** float32 -> IEEE half bits, round to nearest even (subnormals included), overflow to infinity, NaN kept. */
export function floatToFp16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++; // a carry into the exponent is right, up to infinity
  return sign | half;
}

export function fp16ToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

/** The 16-bit encodings of float values (p must be bf16 or fp16). */
export function encode16(p: StoragePrecision, x: ArrayLike<number>): Uint16Array {
  if (p === 'fp32') throw new Error('encode16: fp32 has no 16-bit encoding; write the Float32Array as it is');
  const enc = p === 'bf16' ? floatToBf16 : floatToFp16;
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = enc(x[i]!);
  return out;
}

/** Float values of 16-bit encodings (exact: every bf16 and fp16 value is a float32). */
export function decode16(p: StoragePrecision, bits: Uint16Array): Float32Array {
  if (p === 'fp32') throw new Error('decode16: fp32 has no 16-bit encoding');
  const dec = p === 'bf16' ? bf16ToFloat : fp16ToFloat;
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = dec(bits[i]!);
  return out;
}

/** The values a tensor of precision p holds after storing x: x itself for fp32, else x rounded to the format. */
export function roundTo(p: StoragePrecision, x: ArrayLike<number>): Float32Array {
  return p === 'fp32' ? Float32Array.from(x) : decode16(p, encode16(p, x));
}
