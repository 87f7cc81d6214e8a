import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutOfMemoryError } from '../../workers/gpu/allocator.js';
import { openDevice } from '../../workers/gpu/device.js';
import { Runtime } from '../../workers/gpu/runtime.js';

describe('allocator: bytes per category, peaks, arenas, fragmentation', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  it('counts current and peak bytes per category exactly, and frees them', () => {
    const a = rt.allocator;
    const base = a.stats();
    const t1 = a.tensor('x', 'activations', [3, 5]); // 60 bytes
    const t2 = a.tensor('y', 'comm', [7]); // 28 bytes
    let s = a.stats();
    expect(s.byCategory.activations.allocated - base.byCategory.activations.allocated).toBe(60);
    expect(s.byCategory.comm.allocated - base.byCategory.comm.allocated).toBe(28);
    a.free(t1);
    s = a.stats();
    expect(s.byCategory.activations.allocated).toBe(base.byCategory.activations.allocated);
    expect(s.byCategory.activations.peakAllocated - base.byCategory.activations.allocated).toBeGreaterThanOrEqual(60);
    a.free(t2);
    a.resetPeaks();
    expect(a.stats().byCategory.comm.peakAllocated).toBe(base.byCategory.comm.allocated);
  });

  it('an arena hands out 256-byte-aligned slices, coalesces freed neighbours and reports fragmentation', () => {
    const a = rt.allocator;
    const arena = a.arena('frag', 'workspace', 4 * 256);
    const s0 = arena.alloc('s0', [64]); // one 256-byte slot each
    const s1 = arena.alloc('s1', [64]);
    const s2 = arena.alloc('s2', [64]);
    const s3 = arena.alloc('s3', [10]); // 40 bytes of content in a 256-byte slot
    expect([s0, s1, s2, s3].map((t) => t.byteOffset)).toEqual([0, 256, 512, 768]);
    expect(arena.used).toBe(3 * 256 + 40);
    expect(() => arena.alloc('full', [1])).toThrow(OutOfMemoryError);
    // free two non-adjacent slots: 512 bytes free in two holes of 256 -> fragmentation 0.5
    arena.free(s0);
    arena.free(s2);
    const st = a.stats().arenas.find((x) => x.name === 'frag')!;
    expect(st.largestFree).toBe(256);
    expect(a.stats().fragmentation).toBeGreaterThan(0);
    expect(() => arena.alloc('two-slots', [128])).toThrow(/largest free block 256/);
    // freeing the slot between them coalesces one 768-byte block
    arena.free(s1);
    expect(arena.largestFree()).toBe(768);
    const big = arena.alloc('big', [192]);
    expect(big.byteOffset).toBe(0);
    a.destroyArena(arena);
  });

  it('refuses a tensor larger than the adapter allows per buffer, saying what to do', () => {
    const max = Number(rt.device.limits.maxStorageBufferBindingSize);
    expect(() => rt.allocator.tensor('huge', 'params', [max / 4 + 1])).toThrow(/allows at most \d+ bytes per buffer; use a smaller model/);
  });
});
