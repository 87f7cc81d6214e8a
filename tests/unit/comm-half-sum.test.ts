// The collectives' 16-bit sums (host-memory/dtype.ts: one loop per format, for speed) give the
// bits of the scalar definition: widen both operands, add, round back to nearest even. Every
// 16-bit pattern against a spread of others (zeros, subnormals, the largest finite, infinities,
// NaNs, ordinary values), out of place and in place, at offsets.
import { expect, it } from 'vitest';
import { bfloat16ToFloat, floatToBfloat16, floatToHalf, halfToFloat } from '../../common/half-float.js';
import { reduceInto, reduceTo } from '../../workers/comm/host-memory/dtype.js';

const FORMATS = {
  float16: { widen: halfToFloat, narrow: floatToHalf, isNaN: (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0 },
  bfloat16: { widen: bfloat16ToFloat, narrow: floatToBfloat16, isNaN: (h: number) => (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0 },
} as const;

// second operands: signed zeros, smallest subnormals, largest finite and infinities of both formats, NaNs, then a stride
const OTHERS = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0];
for (let h = 0x0123; h < 0x10000; h += 0x0fed) OTHERS.push(h);

for (const [dtype, f] of Object.entries(FORMATS) as [keyof typeof FORMATS, (typeof FORMATS)[keyof typeof FORMATS]][]) {
  it(`${dtype} sum of every pattern with ${OTHERS.length} others: the bits of narrow(widen(a) + widen(b)), out of place and in place at offsets`, () => {
    const n = 65536;
    const a = new Uint16Array(n + 3);
    for (let h = 0; h < n; h++) a[h + 3] = h;
    const out = new Uint16Array(n + 5);
    const b = new Uint16Array(n + 7);
    let checked = 0;
    for (const other of OTHERS) {
      b.fill(other);
      reduceTo(out, 5, a, 3, b, 7, n, 'sum', dtype);
      const inPlace = a.slice();
      reduceInto(inPlace, b, 'sum', 3, 7, n, dtype);
      for (let h = 0; h < n; h++) {
        const want = f.narrow(f.widen(h) + f.widen(other));
        for (const [got, where] of [
          [out[h + 5]!, 'reduceTo'],
          [inPlace[h + 3]!, 'reduceInto'],
        ] as const) {
          if (got === want || (f.isNaN(got) && f.isNaN(want))) continue;
          expect.fail(
            `${dtype} ${where}: ${h.toString(16)} + ${other.toString(16)} gave ${got.toString(16)}, expected ${want.toString(16)}`,
          );
        }
        checked++;
      }
    }
    expect(checked).toBe(n * OTHERS.length);
  });
}
