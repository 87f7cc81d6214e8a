// Registered memory (workers/comm/host-memory/registered.ts, as NCCL's ncclMemAlloc): the arena's range
// allocator (first fit, 64-byte alignment, merging on release, double frees caught), memAlloc
// falling back to an ordinary array when the arena is full, and reductions on registered
// tensors giving the JS loops' bits with every mix of registered, resident and plain operands.
import { describe, expect, it } from 'vitest';
import { RangeAllocator, isRegistered, memAlloc, memFree } from '../../workers/comm/host-memory/registered.js';
import {
  combineF32,
  combineF32Js,
  giveResident,
  setArenaBytes,
  simdAvailable,
  takeResident,
  type F32Op,
} from '../../workers/comm/host-memory/simd.js';
import { rng } from './rng.js';

// before anything instantiates the kernels in this file's process: a 1 MiB arena
const sized = setArenaBytes(1 << 20);

describe('RangeAllocator', () => {
  it('allocates first fit at 64-byte alignment and merges released neighbours back into one range', () => {
    const a = new RangeAllocator(1024);
    expect(a.alloc(10)).toBe(0);
    expect(a.alloc(64)).toBe(64);
    expect(a.alloc(100)).toBe(128); // 128 bytes
    expect(a.freeBytes).toBe(1024 - 256);
    a.release(64, 64);
    expect(a.alloc(65)).toBe(256); // the 64-byte hole is too small
    expect(a.alloc(64)).toBe(64); // fits the hole exactly
    a.release(0, 10);
    a.release(64, 64);
    a.release(128, 100);
    a.release(256, 65);
    expect(a.freeBytes).toBe(1024);
    expect(a.alloc(1024)).toBe(0); // one range again
    expect(a.alloc(1)).toBe(-1);
  });
  it('catches a double release', () => {
    const a = new RangeAllocator(256);
    const x = a.alloc(64);
    a.alloc(64);
    a.release(x, 64);
    expect(() => a.release(x, 64)).toThrow(/double free/);
  });
  it('never hands out overlapping ranges (5,000 random alloc/release steps) and ends whole', () => {
    const a = new RangeAllocator(1 << 16);
    const live: [number, number][] = [];
    const rnd = rng(12345).next;
    for (let k = 0; k < 5000; k++) {
      if (rnd() < 0.6) {
        const bytes = 1 + Math.floor(rnd() * 4000);
        const at = a.alloc(bytes);
        if (at < 0) continue;
        expect(at % 64).toBe(0);
        const end = at + Math.ceil(bytes / 64) * 64;
        for (const [p, e] of live) expect(end <= p || e <= at).toBe(true);
        live.push([at, end]);
      } else if (live.length) {
        const [p, e] = live.splice(Math.floor(rnd() * live.length), 1)[0];
        a.release(p, e - p);
      }
    }
    for (const [p, e] of live) a.release(p, e - p);
    expect(a.freeBytes).toBe(1 << 16);
  });
});

describe.runIf(simdAvailable())('memAlloc and reductions on registered tensors', () => {
  it('gives zeroed registered tensors while the 1 MiB arena has room, then ordinary arrays; memFree makes room again', () => {
    expect(sized).toBe(true);
    const a = memAlloc(100_000); // 400,000 bytes
    const b = memAlloc(100_000);
    a.fill(3);
    expect(isRegistered(a) && isRegistered(b)).toBe(true);
    const c = memAlloc(100_000); // 1.2 MB > 1 MiB
    expect(isRegistered(c)).toBe(false);
    expect(c.length).toBe(100_000);
    memFree(a);
    const d = memAlloc(100_000);
    expect(isRegistered(d)).toBe(true);
    expect(d.every((v) => v === 0)).toBe(true); // reused memory comes back zeroed
    memFree(b);
    memFree(d);
    memFree(c); // an ordinary array: nothing to do
  });

  it('every mix of registered, resident and plain operands gives the JS loop bits (sum, max, min; in place and not)', () => {
    const n = 70_001; // more than one staging block, and a tail
    const seedOf = (k: number) => k * 7919 + 1;
    const fill = (t: Float32Array, seed: number) => {
      let s = seed;
      for (let i = 0; i < t.length; i++) {
        s = (s * 1103515245 + 12345) % 2147483648;
        const r = s % 7;
        t[i] = r === 0 ? NaN : r === 1 ? -0 : r === 2 ? 0 : r === 3 ? 1.401298464324817e-45 : ((s % 2001) - 1000) / 8;
      }
    };
    const kinds = ['registered', 'resident', 'plain'] as const;
    const make = (kind: (typeof kinds)[number]) => {
      if (kind === 'registered') return memAlloc(n);
      if (kind === 'resident') {
        const slot = takeResident(n * 4)!;
        return new Float32Array(slot.buffer, slot.byteOffset, n);
      }
      return new Float32Array(n);
    };
    const give = (t: Float32Array, kind: (typeof kinds)[number]) =>
      kind === 'registered' ? memFree(t) : kind === 'resident' ? giveResident(Buffer.from(t.buffer, t.byteOffset, 2 << 20)) : undefined;
    let k = 0;
    for (const op of ['sum', 'max', 'min'] as F32Op[])
      for (const kx of kinds)
        for (const ky of kinds)
          for (const inPlace of [true, false]) {
            const x = make(kx),
              y = make(ky);
            fill(x, seedOf(++k));
            fill(y, seedOf(++k));
            const wantX = x.slice(),
              wantY = y.slice();
            const want = new Float32Array(n);
            combineF32Js(op, want, wantX, wantY);
            const o = inPlace ? x : memAlloc(n);
            combineF32(op, o, x, y);
            const g = new Uint32Array(o.buffer, o.byteOffset, n),
              w = new Uint32Array(want.buffer);
            for (let i = 0; i < n; i++)
              if (Number.isNaN(want[i]) ? !Number.isNaN(o[i]) : g[i] !== w[i])
                expect.fail(`${op} x ${kx} y ${ky}${inPlace ? ' in place' : ''}: element ${i} is ${o[i]}, the JS loop gives ${want[i]}`);
            if (!inPlace) memFree(o);
            give(x, kx);
            give(y, ky);
          }
  });
});
