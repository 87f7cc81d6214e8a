// The two 16-bit float formats, one value at a time: IEEE half (fp16, float16) and bfloat16
// (the upper half of a float32). Narrowing rounds to nearest even (subnormals included),
// overflows to infinity and keeps NaN (quiet); widening is exact (every 16-bit value is a
// float32). One copy for every runtime: the device tensors' host codecs (workers/gpu/precision.ts),
// the collectives' payloads (workers/comm/host-memory/dtype.ts, which widens through tables built
// from these), checkpoint export.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> IEEE half bits. */
export function floatToHalf(x: number): number {
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

/** IEEE half bits -> its value. */
export function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

/** float32 -> bfloat16 bits (the upper half of the float32, rounded; overflow carries into infinity). */
export function floatToBfloat16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0) return (b >>> 16) | 0x40; // NaN stays a (quiet) NaN
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bfloat16 bits -> its value. */
export function bfloat16ToFloat(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}
