// Element types of collective payloads and the reductions over them. float16 and bfloat16 both
// travel as raw 16-bit patterns in a Uint16Array (IEEE half, or the top half of a float32);
// a Uint16Array is float16 unless the caller says bfloat16 (the collectives' `dtype` option).
// Reductions widen to float32, combine, and round back (round to nearest even) at every hop, as
// NCCL does for half and bfloat16. Every binary reduction here is commutative bit for bit, so
// partners combining in either order agree exactly.
import type { DType } from '../transport/frames.js';
import { floatToBfloat16, floatToHalf, halfToFloat as scalarHalfToFloat } from '../../../common/half-float.js';
import type { HalfDType } from './simd-half.js';
import { castHalf, combineF32, type HalfSumLoop, SIMD_MIN_ELEMS, sumHalf } from './simd.js';

export type Tensor = Float32Array | Uint16Array;
export type ReduceOp = 'sum' | 'avg' | 'max' | 'min';
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'avg', 'max', 'min'];

/** The dtype a tensor travels as: `declared` if given (and its array type fits), else float32 or float16. */
export function dtypeOf(t: Tensor, declared?: DType): DType {
  const natural: DType | null = t instanceof Float32Array ? 'float32' : t instanceof Uint16Array ? 'float16' : null;
  if (!natural) throw new TypeError('collective payloads must be Float32Array or Uint16Array (float16 or bfloat16 bits)');
  if (declared === undefined || declared === natural) return natural;
  if (declared === 'bfloat16' && natural === 'float16') return 'bfloat16';
  throw new TypeError(
    `a ${t.constructor.name} cannot carry ${declared} (float32 needs a Float32Array, float16 and bfloat16 a Uint16Array)`,
  );
}

/** A typed view of the same dtype over a received byte buffer (copied if misaligned). */
export function viewAs<T extends Tensor>(like: T, bytes: Buffer): T {
  const size = like.BYTES_PER_ELEMENT;
  let b = bytes;
  if (b.byteOffset % size !== 0) {
    b = Buffer.allocUnsafeSlow(bytes.length);
    bytes.copy(b);
  }
  const n = b.length / size;
  return (like instanceof Float32Array ? new Float32Array(b.buffer, b.byteOffset, n) : new Uint16Array(b.buffer, b.byteOffset, n)) as T;
}

/** Bytes of a tensor range, without copying. */
export function bytesOf(t: Tensor, start = 0, end = t.length): Buffer {
  const e = t.BYTES_PER_ELEMENT;
  return Buffer.from(t.buffer, t.byteOffset + start * e, (end - start) * e);
}

// ---- float16 / bfloat16 <-> float32 ----
// Narrowing is common/half-float.ts's (round to nearest even, as NCCL does for half); widening
// reads a table of all 65536 patterns, as the reductions' inner loops want. bfloat16's table is
// written as bits (the high half of a float32), so NaN payloads stay as they were sent.
const F16_TO_F32 = Float32Array.from({ length: 65536 }, (_, h) => scalarHalfToFloat(h));
const BF16_TO_F32 = new Float32Array(65536);
{
  const bits = new Uint32Array(BF16_TO_F32.buffer);
  for (let h = 0; h < 65536; h++) bits[h] = h << 16;
}

export function halfToFloat(h: number): number {
  return F16_TO_F32[h & 0xffff];
}

export function bfloat16ToFloat(h: number): number {
  return BF16_TO_F32[h & 0xffff];
}

export { floatToBfloat16, floatToHalf };

/** How a 16-bit dtype widens (a table of all 65536 patterns) and narrows. */
interface HalfCodec {
  wide: Float32Array;
  narrow: (x: number) => number;
}
const HALF_CODECS: Record<Exclude<DType, 'float32'>, HalfCodec> = {
  float16: { wide: F16_TO_F32, narrow: floatToHalf },
  bfloat16: { wide: BF16_TO_F32, narrow: floatToBfloat16 },
};
const codecOf = (dtype: DType): HalfCodec => {
  if (dtype === 'float32') throw new TypeError('float32 has no 16-bit codec');
  return HALF_CODECS[dtype];
};

// ---- float32 <-> 16-bit arrays (the fp16/bf16 hooks' casts): WebAssembly SIMD (simd-half.ts), JS for tails ----

/** float32 -> 16-bit patterns of `dtype`, rounded to nearest even, into `out` (src's length). */
export function narrowArray(src: Float32Array, dtype: HalfDType, out: Uint16Array): Uint16Array {
  const narrow = dtype === 'bfloat16' ? floatToBfloat16 : floatToHalf;
  castHalf('narrow', dtype, out, src, (from, to) => {
    for (let i = from; i < to; i++) out[i] = narrow(src[i]!);
  });
  return out;
}

/** 16-bit patterns of `dtype` -> float32 (exact), into `out` (bits' length). */
export function widenArray(bits: Uint16Array, dtype: HalfDType, out: Float32Array): Float32Array {
  const wide = codecOf(dtype).wide;
  castHalf('widen', dtype, out, bits, (from, to) => {
    for (let i = from; i < to; i++) out[i] = wide[bits[i]!]!;
  });
  return out;
}

// ---- reductions: dst[i] = op(dst[i], src[i]) ----
type Combine = (a: number, b: number) => number;
const COMBINE: Record<ReduceOp, Combine> = {
  sum: (a, b) => a + b,
  avg: (a, b) => a + b,
  max: (a, b) => (a > b || a !== a ? a : b),
  min: (a, b) => (a < b || a !== a ? a : b),
};

// 16-bit sums, the hot path of the fp16/bf16 hooks and of 16-bit runs' gradients: WebAssembly SIMD
// (simd-half.ts) over long ranges; for short ones, tails, and where it does not run, one loop per
// format that calls its narrowing function directly, so V8 inlines it. The generic loops below
// reach theirs through lookups (the same call site sees every op and both formats), which V8
// cannot inline. Same arithmetic, so the same bits: a + b of the widened values, then narrowed.
function sumFloat16(out: Uint16Array, o: number, a: Uint16Array, ai: number, b: Uint16Array, bi: number, n: number) {
  for (let i = 0; i < n; i++) out[o + i] = floatToHalf(F16_TO_F32[a[ai + i]] + F16_TO_F32[b[bi + i]]);
}
function sumBfloat16(out: Uint16Array, o: number, a: Uint16Array, ai: number, b: Uint16Array, bi: number, n: number) {
  for (let i = 0; i < n; i++) out[o + i] = floatToBfloat16(BF16_TO_F32[a[ai + i]] + BF16_TO_F32[b[bi + i]]);
}
/** A 16-bit format's sum: WebAssembly SIMD over long ranges (simd-half.ts; the same bits), else its JS loop. */
const simdSum =
  (format: HalfDType, js: HalfSumLoop): HalfSumLoop =>
  (out, o, a, ai, b, bi, n) =>
    n < SIMD_MIN_ELEMS
      ? js(out, o, a, ai, b, bi, n)
      : sumHalf(format, out.subarray(o, o + n), a.subarray(ai, ai + n), b.subarray(bi, bi + n), js);
const SUM_FLOAT16 = simdSum('float16', sumFloat16);
const SUM_BFLOAT16 = simdSum('bfloat16', sumBfloat16);
const sumOf16 = (dtype: DType) => (codecOf(dtype) === HALF_CODECS.bfloat16 ? SUM_BFLOAT16 : SUM_FLOAT16);

/** `dtype` says how a Uint16Array's bits read (float16 unless given): the operation's dtype. */
export function reduceInto(
  dst: Tensor,
  src: Tensor,
  op: ReduceOp,
  dstStart = 0,
  srcStart = 0,
  n = src.length - srcStart,
  dtype: DType = dtypeOf(dst),
): void {
  if (dst instanceof Float32Array) {
    const d = dst.subarray(dstStart, dstStart + n);
    return combineF32(op === 'avg' ? 'sum' : op, d, d, (src as Float32Array).subarray(srcStart, srcStart + n));
  }
  if (op === 'sum' || op === 'avg') return sumOf16(dtype)(dst, dstStart, dst, dstStart, src as Uint16Array, srcStart, n);
  const c = COMBINE[op];
  const { wide, narrow } = codecOf(dtype);
  for (let i = 0; i < n; i++) dst[dstStart + i] = narrow(c(wide[dst[dstStart + i]], wide[src[srcStart + i]]));
}

/**
 * out[i] = op(a[i], b[i]) with out distinct from a and b or equal to one of them. float32 goes
 * through combineF32 over whole subarrays (WebAssembly SIMD for long ranges, else one
 * monomorphic JS loop per op: the generic loop, called with both dtypes, ran several times
 * slower on the all-reduce's hot path).
 */
export function reduceTo(
  out: Tensor,
  outStart: number,
  a: Tensor,
  aStart: number,
  b: Tensor,
  bStart: number,
  n: number,
  op: ReduceOp,
  dtype: DType = dtypeOf(out),
): void {
  if (out instanceof Float32Array) {
    const x = a as Float32Array,
      y = b as Float32Array;
    return combineF32(
      op === 'avg' ? 'sum' : op,
      out.subarray(outStart, outStart + n),
      x.subarray(aStart, aStart + n),
      y.subarray(bStart, bStart + n),
    );
  }
  if (op === 'sum' || op === 'avg') return sumOf16(dtype)(out, outStart, a as Uint16Array, aStart, b as Uint16Array, bStart, n);
  const c = COMBINE[op];
  const { wide, narrow } = codecOf(dtype);
  for (let i = 0; i < n; i++) out[outStart + i] = narrow(c(wide[a[aStart + i]], wide[b[bStart + i]]));
}

/** For avg: divide a fully reduced range by the group size (in float32, rounded once). */
export function scaleRange(t: Tensor, start: number, end: number, divisor: number, dtype: DType = dtypeOf(t)): void {
  if (divisor === 1) return;
  if (t instanceof Float32Array) for (let i = start; i < end; i++) t[i] = t[i] / divisor;
  else {
    const { wide, narrow } = codecOf(dtype);
    for (let i = start; i < end; i++) t[i] = narrow(wide[t[i]] / divisor);
  }
}

export function allocLike<T extends Tensor>(like: T, n: number): T {
  return (like instanceof Float32Array ? new Float32Array(n) : new Uint16Array(n)) as T;
}

/** Balanced split of n elements into parts: the first n % parts chunks get one more. */
export function chunkBounds(n: number, parts: number): number[] {
  const b = new Array<number>(parts + 1);
  const base = Math.floor(n / parts),
    extra = n % parts;
  b[0] = 0;
  for (let k = 0; k < parts; k++) b[k + 1] = b[k] + base + (k < extra ? 1 : 0);
  return b;
}
