// The collectives' float32 reductions in WebAssembly SIMD give the same bits as the JS loops they
// replace (workers/comm/host-memory/simd.ts): every length class (shorter than the SIMD threshold, tails of
// 1..15 floats after the 16-float unroll, several 64 Ki-float staging blocks), in place and
// out of place, and the special values: NaN, ±Infinity, ±0 (max(+0, -0) keeps the JS choice,
// -0), subnormals, overflow to Infinity and exact cancellation.
import { describe, expect, it } from 'vitest';
import {
  combineF32,
  combineF32Js,
  giveResident,
  isResident,
  kernelModuleBytes,
  RESIDENT_SLOT_BYTES,
  simdAvailable,
  SIMD_MIN_ELEMS,
  takeResident,
  type F32Op,
} from '../../workers/comm/host-memory/simd.js';
import { reduceInto, reduceTo } from '../../workers/comm/host-memory/dtype.js';

const SPECIAL = [
  NaN,
  Infinity,
  -Infinity,
  0,
  -0,
  1,
  -1,
  1.401298464324817e-45,
  -1.401298464324817e-45,
  1.1754942106924411e-38,
  3.4028234663852886e38,
  -3.4028234663852886e38,
  0.1,
  16777216,
  16777217,
];

/** deterministic mix: special values, random bit patterns (any class, NaNs included), and plain numbers */
function operand(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  const bits = new Uint32Array(out.buffer);
  let s = seed >>> 0 || 1;
  const next = () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), s >>> 0);
  for (let i = 0; i < n; i++) {
    const r = next() % 4;
    if (r === 0) out[i] = SPECIAL[next() % SPECIAL.length];
    else if (r === 1) bits[i] = next();
    else out[i] = ((next() % 2000) - 1000) / 8;
  }
  return out;
}

/** bitwise equal, except that a NaN must meet a NaN (payload bits are not specified) */
function expectSameBits(got: Float32Array, want: Float32Array, what: string) {
  expect(got.length).toBe(want.length);
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const w = new Uint32Array(want.buffer, want.byteOffset, want.length);
  let bad = -1;
  for (let i = 0; i < got.length && bad < 0; i++) {
    if (Number.isNaN(want[i])) {
      if (!Number.isNaN(got[i])) bad = i;
    } else if (g[i] !== w[i]) bad = i;
  }
  if (bad >= 0)
    expect.fail(
      `${what}: element ${bad} is ${got[bad]} (0x${g[bad].toString(16)}), the JS loop gives ${want[bad]} (0x${w[bad].toString(16)})`,
    );
}

describe('comm float32 reductions: WebAssembly SIMD against the JS loop', () => {
  it('the emitted module validates and the kernels are in use on this Node', () => {
    expect(WebAssembly.validate(kernelModuleBytes() as Uint8Array<ArrayBuffer>)).toBe(true);
    expect(simdAvailable()).toBe(true);
  });

  const lengths = [
    0,
    1,
    3,
    15,
    16,
    17,
    SIMD_MIN_ELEMS - 1,
    SIMD_MIN_ELEMS,
    SIMD_MIN_ELEMS + 1,
    1001,
    4099,
    65536,
    65536 + 15,
    3 * 65536 + 7,
  ];
  for (const op of ['sum', 'max', 'min'] as F32Op[])
    it(`${op}: same bits for lengths ${lengths.join(', ')}, out of place and in place`, () => {
      for (const n of lengths) {
        const x = operand(n, 7 + n),
          y = operand(n, 1000 + n);
        const want = new Float32Array(n);
        combineF32Js(op, want, x, y);
        const got = new Float32Array(n);
        combineF32(op, got, x, y);
        expectSameBits(got, want, `${op} n=${n} out of place`);
        const inPlace = x.slice();
        combineF32(op, inPlace, inPlace, y);
        expectSameBits(inPlace, want, `${op} n=${n} in place`);
        // the operands are read, never written, when the output is distinct
        expectSameBits(x, operand(n, 7 + n), `${op} n=${n} x untouched`);
      }
    });

  it('special values pair by pair: NaN wins max/min from either side, max(+0,-0) = -0 and max(-0,+0) = +0, subnormals and overflow', () => {
    const a: number[] = [],
      b: number[] = [];
    for (const u of SPECIAL)
      for (const v of SPECIAL) {
        a.push(u);
        b.push(v);
      }
    // repeat to get past the SIMD threshold and through the vector loop
    const reps = Math.ceil((SIMD_MIN_ELEMS * 2) / a.length);
    const x = new Float32Array(a.length * reps),
      y = new Float32Array(a.length * reps);
    for (let r = 0; r < reps; r++) {
      x.set(a, r * a.length);
      y.set(b, r * b.length);
    }
    for (const op of ['sum', 'max', 'min'] as F32Op[]) {
      const want = new Float32Array(x.length),
        got = new Float32Array(x.length);
      combineF32Js(op, want, x, y);
      combineF32(op, got, x, y);
      expectSameBits(got, want, op);
    }
    const pair = (op: F32Op, u: number, v: number) => {
      const x1 = new Float32Array(SIMD_MIN_ELEMS).fill(u),
        y1 = new Float32Array(SIMD_MIN_ELEMS).fill(v);
      combineF32(op, x1, x1, y1);
      return x1[SIMD_MIN_ELEMS - 20]; // inside the vector loop
    };
    expect(Object.is(pair('max', 0, -0), -0)).toBe(true);
    expect(Object.is(pair('max', -0, 0), 0)).toBe(true);
    expect(Object.is(pair('min', -0, 0), 0)).toBe(true);
    expect(Number.isNaN(pair('max', NaN, 1))).toBe(true);
    expect(Number.isNaN(pair('min', 1, NaN))).toBe(true);
    expect(pair('sum', 3.4028234663852886e38, 3.4028234663852886e38)).toBe(Infinity);
    expect(Number.isNaN(pair('sum', Infinity, -Infinity))).toBe(true);
    expect(Object.is(pair('sum', -0, -0), -0)).toBe(true);
    expect(Object.is(pair('sum', 1.5, -1.5), 0)).toBe(true);
    expect(pair('sum', 1.401298464324817e-45, 1.401298464324817e-45)).toBe(2.802596928649634e-45);
    // 2^24 + 1 is not a float32: round to nearest even
    expect(pair('sum', 16777216, 1)).toBe(16777216);
    expect(pair('sum', 16777218, 1)).toBe(16777220);
  });

  it("operands in the kernels' own memory (receive buffers from takeResident) are read in place, with the same bits", () => {
    const n = RESIDENT_SLOT_BYTES / 4 - 5; // a full slot but for a tail
    const rx = takeResident(n * 4)!,
      ry = takeResident(n * 4)!;
    expect(isResident(rx) && isResident(ry)).toBe(true);
    expect(takeResident(RESIDENT_SLOT_BYTES + 4)).toBeNull(); // larger than a slot: the caller allocates
    try {
      const x = new Float32Array(rx.buffer, rx.byteOffset, n),
        y = new Float32Array(ry.buffer, ry.byteOffset, n);
      x.set(operand(n, 11));
      y.set(operand(n, 12));
      const plainX = x.slice(),
        plainY = y.slice();
      for (const op of ['sum', 'max', 'min'] as F32Op[]) {
        const want = new Float32Array(n);
        combineF32Js(op, want, plainX, plainY);
        for (const [a, b, what] of [
          [x, plainY, 'x resident'],
          [plainX, y, 'y resident'],
          [x, y, 'both resident'],
        ] as const) {
          const got = new Float32Array(n);
          combineF32(op, got, a, b);
          expectSameBits(got, want, `${op} ${what}`);
        }
        // in place into the tensor from a resident piece, as the all-reduce does
        const t = plainY.slice();
        combineF32(op, t, x, t);
        expectSameBits(t, want, `${op} resident into the tensor`);
      }
      expectSameBits(x, plainX, 'resident x untouched');
    } finally {
      giveResident(rx);
      giveResident(ry);
    }
  });

  it('reduceInto / reduceTo (what the ring calls) keep offsets and ops, avg summing like sum', () => {
    const n = 70_001;
    const dst = operand(n + 10, 3),
      src = operand(n + 5, 4);
    const want = dst.slice();
    combineF32Js('max', want.subarray(10, 10 + n), want.subarray(10, 10 + n), src.subarray(5, 5 + n));
    const got = dst.slice();
    reduceInto(got, src, 'max', 10, 5, n);
    expectSameBits(got, want, 'reduceInto max');
    const out = new Float32Array(n + 3);
    const wantOut = new Float32Array(n + 3);
    combineF32Js('sum', wantOut.subarray(3), dst.subarray(10, 10 + n), src.subarray(5, 5 + n));
    reduceTo(out, 3, dst, 10, src, 5, n, 'avg');
    expectSameBits(out, wantOut, 'reduceTo avg');
  });
});
