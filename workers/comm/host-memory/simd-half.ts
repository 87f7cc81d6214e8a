// The 16-bit floats of the collectives' hot path in WebAssembly SIMD: the sums (the fp16/bf16
// communication hooks' and 16-bit runs' gradients: widen both operands to float32, add (one IEEE
// binary32 addition), narrow back rounding to nearest even), and the hooks' casts of float32
// gradients to 16 bits and back. The JS loops took 4.5-6 ns an element for a sum (dtype.ts) and
// 8-16 for a cast and its way back (comm-hooks/half-gradients.ts), against 0.4 for the float32
// sum, so a 16-bit payload was handled slower than a 10 Gbit/s link delivers it. The same bits as
// the JS loops, NaN payloads aside (both keep NaN a quiet NaN): the JS loop adds in float64 and
// stores to float32 before narrowing, which rounds the same way (simd.ts), and the narrowing
// below is common/half-float.ts's, without branches.
//
//   bfloat16  widen: bits << 16. narrow: (b + 0x7fff + ((b >> 16) & 1)) >> 16, a NaN (b >> 16) | 0x40
//   float16   widen: em = h & 0x7fff; the float32 with bits em << 13, times 2^112 (exact, subnormals
//             included: WebAssembly does not flush them); an infinity or NaN (em > 0x7bff) gets
//             float32's all-ones exponent; the sign moves to bit 31.
//             narrow: a = |b|; normal (a >= 2^-14): ((a - (112 << 23)) + 0xfff + ((a >> 13) & 1)) >> 13
//             (a carry into the exponent is right, up to infinity); below 2^-14: the float32 sum
//             a + 0.5 rounds a to a multiple of 2^-24, the smallest subnormal, so its bits less
//             0.5's are the subnormal; a >= 65520's neighbourhood (2^16) infinity; a NaN 0x7e00.
// A sum does 8 elements at a time: 4 loaded and widened from each operand (v128.load16x4_u), two
// sums of 4 narrowed and packed back to 8 (i16x8.narrow_i32x4_u: lanes are 0..0xffff).
import {
  ConstPool,
  F32X4_ADD,
  I32_CONST,
  I16X8_NARROW_I32X4_U,
  I32X4_ADD,
  I32X4_GT_S,
  I32X4_LE_S,
  I32X4_LT_S,
  I32X4_SHL,
  I32X4_SHR_U,
  I32X4_SUB,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  mem,
  PA,
  PB,
  PO,
  simd,
  streamKernel,
  V0,
  V128_AND,
  V128_BITSELECT,
  V128_LOAD,
  V128_LOAD16X4_U,
  V128_OR,
  V128_STORE,
} from '../../wasm/encode.js';

export type HalfDType = 'float16' | 'bfloat16';

// v128 scratch locals
const H = V0,
  F = V0 + 1,
  AB = V0 + 2;
const LOCALS = 3;

const op = simd;
/** a vector constant (ConstPool.get) */
type Const = (x: number) => number[];
const and = (c: Const, x: number) => [...c(x), ...op(V128_AND)];
const add = (c: Const, x: number) => [...c(x), ...op(I32X4_ADD)];
const shl = (n: number) => [I32_CONST, n, ...op(I32X4_SHL)];
const shr = (n: number) => [I32_CONST, n, ...op(I32X4_SHR_U)];
const get = (l: number) => [LOCAL_GET, l];

/** u16 values in i32 lanes (on the stack) -> their float32 bits */
function widen(c: Const, dtype: HalfDType): number[] {
  if (dtype === 'bfloat16') return shl(16);
  return [
    LOCAL_TEE,
    H,
    ...and(c, 0x7fff),
    ...shl(13),
    ...c(0x77800000), // 2^112
    ...op(0xe6), // f32x4.mul
    // an infinity or NaN (exponent 31): the float32 exponent all ones
    ...get(H),
    ...and(c, 0x7fff),
    ...c(0x7bff),
    ...op(I32X4_GT_S),
    ...and(c, 0x7f800000),
    ...op(V128_OR),
    ...get(H),
    ...and(c, 0x8000),
    ...shl(16),
    ...op(V128_OR),
  ];
}

/** float32 bits (on the stack) -> the 16-bit pattern in i32 lanes, rounded to nearest even */
function narrow(c: Const, dtype: HalfDType): number[] {
  if (dtype === 'bfloat16')
    return [
      LOCAL_SET,
      F,
      ...get(F),
      ...shr(16),
      ...c(0x40),
      ...op(V128_OR), // a NaN
      ...get(F),
      ...add(c, 0x7fff),
      ...get(F),
      ...shr(16),
      ...and(c, 1),
      ...op(I32X4_ADD),
      ...shr(16), // rounded
      ...get(F),
      ...and(c, 0x7fffffff),
      ...c(0x7f800000),
      ...op(I32X4_GT_S), // a NaN
      ...op(V128_BITSELECT),
    ];
  return [
    LOCAL_TEE,
    F,
    ...and(c, 0x7fffffff),
    LOCAL_SET,
    AB,
    // below 2^-14: bits(a + 0.5) - bits(0.5)
    ...get(AB),
    ...c(0x3f000000),
    ...op(F32X4_ADD),
    ...c(0x3f000000),
    ...op(I32X4_SUB),
    // normal
    ...get(AB),
    ...c(112 << 23),
    ...op(I32X4_SUB),
    ...add(c, 0xfff),
    ...get(AB),
    ...shr(13),
    ...and(c, 1),
    ...op(I32X4_ADD),
    ...shr(13),
    ...get(AB),
    ...c(113 << 23),
    ...op(I32X4_LT_S),
    ...op(V128_BITSELECT),
    // infinity from 2^16 up (65520 and above already carried into it)
    ...c(0x7c00),
    ...get(AB),
    ...c(143 << 23),
    ...op(I32X4_LT_S),
    ...op(V128_BITSELECT),
    // a NaN
    ...c(0x7e00),
    ...get(AB),
    ...c(0x7f800000),
    ...op(I32X4_LE_S),
    ...op(V128_BITSELECT),
    ...get(F),
    ...shr(16),
    ...and(c, 0x8000),
    ...op(V128_OR),
  ];
}

/** the 4 sums whose operands start `off` bytes into this step, as u16 values in i32 lanes */
const fourSums = (c: Const, dtype: HalfDType, off: number) => [
  LOCAL_GET,
  PA,
  ...op(V128_LOAD16X4_U),
  ...mem(off, 3),
  ...widen(c, dtype),
  LOCAL_GET,
  PB,
  ...op(V128_LOAD16X4_U),
  ...mem(off, 3),
  ...widen(c, dtype),
  ...op(F32X4_ADD),
  ...narrow(c, dtype),
];

/** 8 elements at byte offset `off` of this step */
const eightSums = (c: Const, dtype: HalfDType, off: number) => [
  LOCAL_GET,
  PO,
  ...fourSums(c, dtype, off),
  ...fourSums(c, dtype, off + 8),
  ...op(I16X8_NARROW_I32X4_U),
  ...op(V128_STORE),
  ...mem(off),
];

/** 16-bit bytes one loop step takes (16 elements); a kernel's len is a multiple of it */
export const HALF_STEP_BYTES = 32;

/** The body of `sum_f16` / `sum_bf16`: out = a + b over len bytes of 16-bit patterns. */
export function halfSumBody(dtype: HalfDType): number[] {
  return withConstants((c) => [...eightSums(c, dtype, 0), ...eightSums(c, dtype, 16)]);
}

/** The body of `narrow_f16` / `narrow_bf16`: out (16-bit, len bytes) = a (float32) rounded to nearest even. */
export function narrowBody(dtype: HalfDType): number[] {
  // 8 elements: two vectors of floats in, one of 16-bit patterns out
  const eight = (c: Const, off: number) => [
    LOCAL_GET,
    PO,
    LOCAL_GET,
    PA,
    ...op(V128_LOAD),
    ...mem(2 * off),
    ...narrow(c, dtype),
    LOCAL_GET,
    PA,
    ...op(V128_LOAD),
    ...mem(2 * off + 16),
    ...narrow(c, dtype),
    ...op(I16X8_NARROW_I32X4_U),
    ...op(V128_STORE),
    ...mem(off),
  ];
  return withConstants((c) => [...eight(c, 0), ...eight(c, 16)], { wideA: true });
}

/** The body of `widen_f16` / `widen_bf16`: out (float32) = a (16-bit, len bytes), exactly. */
export function widenBody(dtype: HalfDType): number[] {
  const four = (c: Const, off: number) => [
    LOCAL_GET,
    PO,
    LOCAL_GET,
    PA,
    ...op(V128_LOAD16X4_U),
    ...mem(off, 3),
    ...widen(c, dtype),
    ...op(V128_STORE),
    ...mem(2 * off),
  ];
  return withConstants((c) => [0, 8, 16, 24].flatMap((off) => four(c, off)), { wideOut: true });
}

/** A kernel of HALF_STEP_BYTES steps whose vector constants sit in locals set before the loop. */
function withConstants(step: (c: Const) => number[], wide: { wideOut?: boolean; wideA?: boolean } = {}): number[] {
  const pool = new ConstPool(V0 + LOCALS);
  const code = step((x) => pool.get(x));
  return streamKernel(LOCALS + pool.size, code, HALF_STEP_BYTES, { prologue: pool.prologue(), ...wide });
}
