// The collectives' 16-bit sums in WebAssembly SIMD (workers/comm/host-memory/simd-half.ts) give
// the bits of the definition: widen both operands (common/half-float.ts), add, round to nearest
// even. Checked for every 16-bit pattern against many partners (subnormals, overflow to
// infinity, exact cancellation, ties, NaN), every length class (below the SIMD threshold, tails
// after the 16-element step, several staging blocks), in place, at offsets, and with operands
// read in place from the kernels' own memory.
import { describe, expect, it } from 'vitest';
import { bfloat16ToFloat, floatToBfloat16, floatToHalf, halfToFloat } from '../../common/half-float.js';
import { narrowArray, reduceInto, reduceTo, widenArray } from '../../workers/comm/host-memory/dtype.js';
import { giveResident, simdAvailable, SIMD_MIN_ELEMS, takeResident } from '../../workers/comm/host-memory/simd.js';

type Format = 'float16' | 'bfloat16';
const FORMATS: readonly Format[] = ['float16', 'bfloat16'];
const widen = (f: Format, h: number) => (f === 'float16' ? halfToFloat(h) : bfloat16ToFloat(h));
const narrow = (f: Format, x: number) => (f === 'float16' ? floatToHalf(x) : floatToBfloat16(x));
const isNaN16 = (f: Format, h: number) => Number.isNaN(widen(f, h));

/** the definition, one element at a time */
function reference(f: Format, a: Uint16Array, b: Uint16Array): Uint16Array {
  return Uint16Array.from(a, (x, i) => narrow(f, Math.fround(widen(f, x) + widen(f, b[i]!))));
}

function expectSameBits(f: Format, got: Uint16Array, want: Uint16Array, what: string, a?: Uint16Array, b?: Uint16Array) {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < got.length; i++) {
    const same = isNaN16(f, want[i]!) ? isNaN16(f, got[i]!) : got[i] === want[i];
    if (!same) {
      const ops = a && b ? ` (0x${a[i]!.toString(16)} + 0x${b[i]!.toString(16)})` : '';
      expect.fail(`${f} ${what}: element ${i}${ops} is 0x${got[i]!.toString(16)}, the definition gives 0x${want[i]!.toString(16)}`);
    }
  }
}

function patterns(n: number, seed: number): Uint16Array {
  let s = seed >>> 0 || 1;
  return Uint16Array.from({ length: n }, () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), s & 0xffff));
}

const ALL = Uint16Array.from({ length: 65536 }, (_, h) => h);

describe('16-bit sums in WebAssembly SIMD', () => {
  it('run on this Node (else every 16-bit sum takes the JS loop)', () => {
    expect(simdAvailable()).toBe(true);
  });

  for (const f of FORMATS) {
    it(`${f}: every pattern plus itself, its negation, its neighbours, a tie-maker and eight random partners: the definition's bits`, () => {
      const partners: [string, Uint16Array][] = [
        ['itself', ALL],
        ['its negation', ALL.map((h) => h ^ 0x8000)],
        ['the next pattern', ALL.map((h) => (h + 1) & 0xffff)],
        ['the previous pattern', ALL.map((h) => (h - 1) & 0xffff)],
        // one unit in the last place of 1.0 at the lowest order: makes ties at many magnitudes
        ['the smallest subnormal', ALL.map(() => 1)],
        ...Array.from({ length: 8 }, (_, k) => [`random ${k}`, patterns(65536, 101 + k)] as [string, Uint16Array]),
      ];
      for (const [what, b] of partners) {
        const got = new Uint16Array(65536);
        reduceTo(got, 0, ALL, 0, b, 0, 65536, 'sum', f);
        expectSameBits(f, got, reference(f, ALL, b), `plus ${what}`, ALL, b);
      }
    });

    it(`${f}: every length class, out of place and in place, at offsets`, () => {
      const lengths = [1, 15, SIMD_MIN_ELEMS - 1, SIMD_MIN_ELEMS, SIMD_MIN_ELEMS + 1, SIMD_MIN_ELEMS + 15, 4096 + 7, 3 * 131_072 + 9];
      for (const n of lengths) {
        const a = patterns(n + 3, n),
          b = patterns(n + 5, n + 1);
        const want = reference(f, a.subarray(3), b.subarray(5));
        const out = new Uint16Array(n + 2);
        reduceTo(out, 2, a, 3, b, 5, n, 'sum', f);
        expectSameBits(f, out.subarray(2), want, `length ${n} out of place`);
        const dst = a.slice();
        reduceInto(dst, b, 'sum', 3, 5, n, f);
        expectSameBits(f, dst.subarray(3), want, `length ${n} in place`);
        expect(dst.subarray(0, 3)).toEqual(a.subarray(0, 3));
      }
    });

    it(`${f}: operands in the kernels' memory (resident receive buffers) are read in place, with the same bits`, () => {
      const n = 100_003;
      const rx = takeResident(n * 2)!;
      try {
        const x = new Uint16Array(rx.buffer, rx.byteOffset, n);
        x.set(patterns(n, 7));
        const y = patterns(n, 8);
        const want = reference(f, x, y);
        const t = y.slice();
        reduceInto(t, x, 'sum', 0, 0, n, f);
        expectSameBits(f, t, want, 'resident source into a tensor');
        expectSameBits(f, x, patterns(n, 7), 'the resident piece untouched');
      } finally {
        giveResident(rx);
      }
    });
  }
});

describe("the fp16/bf16 hooks' casts in WebAssembly SIMD", () => {
  /** float32 inputs of every class: every 16-bit pattern widened (exact), their midpoints (ties), random bits, and near the edges */
  function floats(f: Format): Float32Array {
    const out: number[] = [];
    for (let h = 0; h < 65536; h++) out.push(widen(f, h));
    const bits = new Uint32Array(patterns(65536, 5).length * 2);
    let s = 99;
    for (let i = 0; i < bits.length; i++) bits[i] = ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), s >>> 0);
    const x = new Float32Array(out.length * 2 + bits.length);
    x.set(out);
    // the midpoint of each pattern and the next: exact ties, which round to even
    for (let h = 0; h < 65535; h++) x[out.length + h] = (widen(f, h) + widen(f, h + 1)) / 2;
    x.set(new Float32Array(bits.buffer), out.length * 2);
    return x;
  }

  for (const f of FORMATS) {
    it(`${f}: narrow rounds every class to nearest even as half-float.ts does, and widen gives every pattern's value exactly`, () => {
      const x = floats(f);
      for (const n of [x.length, SIMD_MIN_ELEMS + 13, 100]) {
        const src = x.subarray(x.length - n);
        const got = narrowArray(src, f, new Uint16Array(n));
        const want = Uint16Array.from(src, (v) => narrow(f, v));
        expectSameBits(f, got, want, `narrow of ${n}`);
      }
      const wide = widenArray(ALL, f, new Float32Array(65536));
      for (let h = 0; h < 65536; h++) {
        const want = widen(f, h);
        const ok = Number.isNaN(want) ? Number.isNaN(wide[h]) : Object.is(wide[h], want);
        if (!ok) expect.fail(`${f} widen 0x${h.toString(16)}: ${wide[h]}, expected ${want}`);
      }
    });
  }
});
