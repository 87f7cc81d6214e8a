// The 16-bit wire's packing: a flat range's parameter elements without the slots' padding, and back.
import { describe, expect, it } from 'vitest';
import { PackedRanges, wireDtypeOf } from '../../../workers/precision/packed-wire.js';

// three tensors in 128-element slots (a 16-bit store's): 200 (slots 0-1), 64 (slot 2), 130 (slots 3-4)
const refs = [
  { offset: 0, numel: 200 },
  { offset: 256, numel: 64 },
  { offset: 384, numel: 130 },
];
const F = 640;
const flat = () => {
  const x = new Uint16Array(F);
  for (const r of refs) for (let i = 0; i < r.numel; i++) x[r.offset + i] = r.offset + i + 1; // padding stays 0
  return x;
};

describe('PackedRanges', () => {
  const p = new PackedRanges(refs);

  it('counts the parameter elements of a range and of shard bounds (394 of 640)', () => {
    expect(p.count(0, F)).toBe(394);
    expect(p.count(128, 300)).toBe(72 + 44);
    expect(p.count(200, 256)).toBe(0);
    expect(p.counts([0, 256, 512, F])).toEqual([200, 64 + 128, 2]);
  });

  it('packs a range without its padding and unpacks it to the same flat values (padding zeros)', () => {
    const x = flat();
    const all = p.pack(x, 0, F);
    expect(all).toHaveLength(394);
    expect(all.every((v) => v !== 0)).toBe(true);
    expect(Array.from(p.unpack(all, 0, F))).toEqual(Array.from(x));
    // a sub-range: src[0] is element lo
    const part = p.pack(x.subarray(128, 400), 128, 400);
    expect(Array.from(part)).toEqual([...x.subarray(128, 200), ...x.subarray(256, 320), ...x.subarray(384, 400)]);
    expect(Array.from(p.unpack(part, 128, 400))).toEqual(Array.from(x.subarray(128, 400)));
  });

  it('refuses to unpack a buffer of another length than the range holds', () => {
    expect(() => p.unpack(new Uint16Array(3), 0, F)).toThrow(/3 packed elements, the range holds 394/);
  });

  it('names the wire format of a store', () => {
    expect([wireDtypeOf({ precision: 'bf16' }), wireDtypeOf({ precision: 'fp16' }), wireDtypeOf({ precision: 'fp32' })]).toEqual([
      'bfloat16',
      'float16',
      null,
    ]);
  });
});
