// The pieces under the collectives, in-process: frame validation (every malformed header is
// rejected with a reason), float16 conversion, the balanced split ZeRO shards use, reductions.
import { describe, expect, it } from 'vitest';
import {
  decodeHeader,
  encodeHeader,
  FLAG_PAYLOAD_FOLLOWS,
  FLAG_PAYLOAD_SHM,
  HEADER_BYTES,
  INLINE_MAX_BYTES,
  FrameKind,
  type FrameHeader,
} from '../../workers/comm/transport/frames.js';
import {
  bfloat16ToFloat,
  chunkBounds,
  dtypeOf,
  floatToBfloat16,
  floatToHalf,
  halfToFloat,
  reduceInto,
  reduceTo,
  scaleRange,
} from '../../workers/comm/host-memory/dtype.js';
import { FrameError } from '../../workers/comm/errors.js';
import { binomialTree } from '../../workers/comm/algorithms/tree.js';

const base: FrameHeader = {
  kind: FrameKind.Collective,
  dtype: 'float32',
  flags: 0,
  frameSeq: 7,
  group: 2,
  seq: 9,
  step: 3,
  offset: 64,
  bytes: 8,
  check: 0xdeadbeef,
  ringPos: 0,
};
const frame = (h: FrameHeader, payload = Buffer.alloc(h.flags ? 0 : h.bytes)) => Buffer.concat([encodeHeader(h), payload]);

describe('frames', () => {
  it('round-trips a 40-byte header', () => {
    expect(decodeHeader(frame(base), 1 << 20)).toEqual(base);
    expect(HEADER_BYTES).toBe(40);
  });
  it.each([
    ['bad magic', (b: Buffer) => b.writeUInt32LE(0x12345678, 0), /bad magic/],
    ['version', (b: Buffer) => (b[4] = 9), /version 9/],
    ['kind', (b: Buffer) => (b[5] = 7), /unknown frame kind/],
    ['dtype', (b: Buffer) => (b[6] = 9), /unknown dtype/],
    ['flags', (b: Buffer) => (b[7] = 0x80), /unknown flags/],
    ['a ring position without a shared-memory payload', (b: Buffer) => b.writeUInt32LE(1, 36), /ring position set on a frame without/],
    ['both payload flags', (b: Buffer) => (b[7] = FLAG_PAYLOAD_FOLLOWS | FLAG_PAYLOAD_SHM), /unknown flags 0x3/],
    [
      'a control frame with a payload flag',
      (b: Buffer) => ((b[5] = FrameKind.Control), (b[7] = FLAG_PAYLOAD_SHM)),
      /control frame carries its payload inline/,
    ],
    ['oversized', (b: Buffer) => b.writeUInt32LE(1 << 30, 28), /exceeds/],
    ['inline length', (b: Buffer) => b.writeUInt32LE(12, 28), /inline payload of 8 bytes, header says 12/],
    ['partial element', (b: Buffer) => b.writeUInt32LE(6, 28), /whole number/],
  ])('rejects %s', (_name, mutate, re) => {
    const b = frame(base);
    mutate(b);
    expect(() => decodeHeader(b, 1 << 20)).toThrow(FrameError);
    expect(() => decodeHeader(b, 1 << 20)).toThrow(re);
  });
  it('rejects short frames and small payloads announced as separate', () => {
    expect(() => decodeHeader(Buffer.alloc(12), 1 << 20)).toThrow(/shorter/);
    expect(() => decodeHeader(frame({ ...base, flags: FLAG_PAYLOAD_FOLLOWS, bytes: 16 }), 1 << 20)).toThrow(/must be inline/);
    expect(decodeHeader(frame({ ...base, flags: FLAG_PAYLOAD_FOLLOWS, bytes: INLINE_MAX_BYTES + 4 }), 1 << 20).bytes).toBe(
      INLINE_MAX_BYTES + 4,
    );
  });
  it('a shared-memory payload: the header alone, with the ring position; never small, never with inline bytes', () => {
    const shm = { ...base, flags: FLAG_PAYLOAD_SHM, bytes: 2 << 20, ringPos: 6 << 20 };
    expect(decodeHeader(encodeHeader(shm), 64 << 20)).toEqual(shm);
    expect(() => decodeHeader(encodeHeader({ ...shm, bytes: 16 }), 64 << 20)).toThrow(/must be inline/);
    expect(() => decodeHeader(Buffer.concat([encodeHeader(shm), Buffer.alloc(4)]), 64 << 20)).toThrow(/carries inline bytes/);
  });
});

describe('float16', () => {
  it('every finite half survives half -> float -> half', () => {
    for (let h = 0; h < 65536; h++) {
      const f = halfToFloat(h);
      if (Number.isNaN(f)) expect(Number.isNaN(halfToFloat(floatToHalf(f)))).toBe(true);
      else expect(floatToHalf(f)).toBe(h);
    }
  });
  it('rounds to nearest even, overflows to infinity, keeps subnormals', () => {
    expect(halfToFloat(floatToHalf(2049))).toBe(2048); // tie -> even
    expect(halfToFloat(floatToHalf(2051))).toBe(2052);
    expect(halfToFloat(floatToHalf(70000))).toBe(Infinity);
    expect(halfToFloat(floatToHalf(2 ** -24))).toBe(2 ** -24);
    expect(halfToFloat(floatToHalf(-0.1))).toBeCloseTo(-0.1, 3);
  });
  it('sums in float16 round at every step', () => {
    const a = new Uint16Array([floatToHalf(1), floatToHalf(2048)]);
    reduceInto(a, new Uint16Array([floatToHalf(2), floatToHalf(1)]), 'sum');
    expect([...a].map(halfToFloat)).toEqual([3, 2048]);
    scaleRange(a, 0, 2, 2);
    expect([...a].map(halfToFloat)).toEqual([1.5, 1024]);
  });
});

describe('bfloat16', () => {
  it('every bfloat16 survives bf16 -> float -> bf16, and widening is the top half of the float32 bits', () => {
    const bits = new Uint32Array(1);
    const f = new Float32Array(bits.buffer);
    const wrong: number[] = []; // one expect at the end: 65536 expects take seconds
    for (let h = 0; h < 65536; h++) {
      const x = bfloat16ToFloat(h);
      f[0] = x;
      const ok = Number.isNaN(x) ? Number.isNaN(bfloat16ToFloat(floatToBfloat16(x))) : bits[0] >>> 16 === h && floatToBfloat16(x) === h;
      if (!ok) wrong.push(h);
    }
    expect(wrong).toEqual([]);
  });
  it('rounds to nearest even, overflows to infinity, keeps NaN and the float32 range', () => {
    expect(bfloat16ToFloat(floatToBfloat16(257))).toBe(256); // 257 is a tie between 256 and 258: even mantissa
    expect(bfloat16ToFloat(floatToBfloat16(259))).toBe(260); // tie between 258 and 260 -> 260
    expect(bfloat16ToFloat(floatToBfloat16(257.5))).toBe(258); // above the tie
    expect(bfloat16ToFloat(floatToBfloat16(3.4e38))).toBe(Infinity); // rounds past the largest finite
    expect(bfloat16ToFloat(floatToBfloat16(1e30))).toBeCloseTo(1e30, -28); // float16 would overflow at 65504
    expect(Number.isNaN(bfloat16ToFloat(floatToBfloat16(NaN)))).toBe(true);
    expect(bfloat16ToFloat(floatToBfloat16(-0.1))).toBeCloseTo(-0.1, 2);
  });
  it('sums and averages in bfloat16 widen to float32 and round once per step; the same bits as float16 mean other numbers', () => {
    const a = new Uint16Array([floatToBfloat16(1), floatToBfloat16(256), floatToBfloat16(3)]);
    reduceInto(a, new Uint16Array([floatToBfloat16(2), floatToBfloat16(1), floatToBfloat16(4)]), 'sum', 0, 0, 3, 'bfloat16');
    expect([...a].map(bfloat16ToFloat)).toEqual([3, 256, 7]); // 257 rounds to even
    scaleRange(a, 0, 3, 3, 'bfloat16');
    expect([...a].map(bfloat16ToFloat)).toEqual([1, bfloat16ToFloat(floatToBfloat16(256 / 3)), bfloat16ToFloat(floatToBfloat16(7 / 3))]);
    const out = new Uint16Array(1);
    reduceTo(out, 0, new Uint16Array([floatToBfloat16(1e20)]), 0, new Uint16Array([floatToBfloat16(1e20)]), 0, 1, 'max', 'bfloat16');
    expect(bfloat16ToFloat(out[0])).toBe(bfloat16ToFloat(floatToBfloat16(1e20)));
    // without the dtype the same bits read as float16
    const h = new Uint16Array([floatToBfloat16(1)]);
    reduceInto(h, new Uint16Array([floatToBfloat16(1)]), 'sum');
    expect(halfToFloat(h[0])).toBe(2 * halfToFloat(floatToBfloat16(1)));
  });
  it('a Uint16Array is float16 unless declared bfloat16; a Float32Array cannot carry 16-bit dtypes', () => {
    expect(dtypeOf(new Uint16Array(1))).toBe('float16');
    expect(dtypeOf(new Uint16Array(1), 'bfloat16')).toBe('bfloat16');
    expect(dtypeOf(new Float32Array(1), 'float32')).toBe('float32');
    expect(() => dtypeOf(new Float32Array(1), 'bfloat16')).toThrow(/Float32Array cannot carry bfloat16/);
    expect(() => dtypeOf(new Uint16Array(1), 'float32')).toThrow(/Uint16Array cannot carry float32/);
  });
  it('frames carry bfloat16 as dtype code 3', () => {
    const h = { ...base, dtype: 'bfloat16' as const, bytes: 6 };
    const b = Buffer.concat([encodeHeader(h), Buffer.alloc(6)]);
    expect(b[6]).toBe(3);
    expect(decodeHeader(b, 64 << 20).dtype).toBe('bfloat16');
  });
});

describe('layout helpers', () => {
  it('chunkBounds splits 10 over 4 as 3,3,2,2 and 2 over 4 as 1,1,0,0', () => {
    expect(chunkBounds(10, 4)).toEqual([0, 3, 6, 8, 10]);
    expect(chunkBounds(2, 4)).toEqual([0, 1, 2, 2, 2]);
    expect(chunkBounds(0, 3)).toEqual([0, 0, 0, 0]);
  });
  it('binomial trees reach every rank exactly once for n = 1..9', () => {
    for (let n = 1; n <= 9; n++) {
      const reached = new Set<number>([0]);
      const queue = [0];
      while (queue.length) {
        const v = queue.shift()!;
        for (const c of binomialTree(v, n).children) {
          expect(binomialTree(c, n).parent).toBe(v);
          expect(reached.has(c)).toBe(false);
          reached.add(c);
          queue.push(c);
        }
      }
      expect(reached.size).toBe(n);
    }
  });
  it('max/min propagate NaN', () => {
    const a = new Float32Array([1, NaN, 3]);
    reduceInto(a, new Float32Array([NaN, 2, 1]), 'max');
    expect(Number.isNaN(a[0]) && Number.isNaN(a[1])).toBe(true);
    expect(a[2]).toBe(3);
  });
});
