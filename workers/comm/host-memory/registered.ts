// Registered host memory, as NCCL's ncclMemAlloc: float32 tensors allocated inside the
// reduction kernels' WebAssembly memory (simd.ts), where a reduction reads and writes them in
// place instead of copying them through staging blocks. A received piece lands in that memory
// too (resident slots), so a ring step on a registered tensor is one vector loop and no memcpy:
// in a world-2 all-reduce of 16 MiB the two copies per reduced byte were ~10% of the CPU time.
// A tensor that does not fit (or where the kernels do not run) is an ordinary Float32Array:
// everything works on either, registered ones are just cheaper to reduce.
import { kernelArena } from './simd.js';

const ALIGN = 64;

/**
 * First-fit allocation of byte ranges in [0, size), aligned to 64 bytes, with neighbouring free
 * ranges merged on release. Pure bookkeeping (unit tested).
 */
export class RangeAllocator {
  /** free ranges [offset, bytes], sorted by offset, never adjacent */
  private readonly free: [number, number][];
  constructor(readonly size: number) {
    this.free = size > 0 ? [[0, size]] : [];
  }

  /** Offset of `bytes` (rounded up to 64) of free space, or -1. */
  alloc(bytes: number): number {
    const need = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    for (let i = 0; i < this.free.length; i++) {
      const [at, len] = this.free[i];
      if (len < need) continue;
      if (len === need) this.free.splice(i, 1);
      else this.free[i] = [at + need, len - need];
      return at;
    }
    return -1;
  }

  /** Gives back what alloc(bytes) returned at `at`. */
  release(at: number, bytes: number): void {
    const len = Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
    let i = 0;
    while (i < this.free.length && this.free[i][0] < at) i++;
    const prev = this.free[i - 1],
      next = this.free[i];
    if ((prev && prev[0] + prev[1] > at) || (next && at + len > next[0]))
      throw new Error(`release of [${at}, ${at + len}) overlaps free space: double free?`);
    if (prev && prev[0] + prev[1] === at) {
      prev[1] += len;
      if (next && prev[0] + prev[1] === next[0]) {
        prev[1] += next[1];
        this.free.splice(i, 1);
      }
    } else if (next && at + len === next[0]) this.free[i] = [at, len + next[1]];
    else this.free.splice(i, 0, [at, len]);
  }

  get freeBytes(): number {
    return this.free.reduce((a, [, len]) => a + len, 0);
  }
}

let arena: { memory: ArrayBuffer; base: number; alloc: RangeAllocator } | null | undefined;
function getArena() {
  if (arena === undefined) {
    const k = kernelArena();
    arena = k && k.bytes > 0 ? { memory: k.memory, base: k.base, alloc: new RangeAllocator(k.bytes) } : null;
  }
  return arena;
}

/**
 * A zeroed float32 tensor of `numel` elements, in registered memory when there is room (and
 * WebAssembly SIMD runs here), else an ordinary Float32Array. Give it back with memFree.
 */
export function memAlloc(numel: number): Float32Array {
  const a = numel > 0 ? getArena() : null;
  const at = a ? a.alloc.alloc(numel * 4) : -1;
  if (!a || at < 0) return new Float32Array(numel);
  const t = new Float32Array(a.memory, a.base + at, numel);
  t.fill(0);
  return t;
}

/** Whether `t` lives in registered memory (a tensor from memAlloc, or a view of one). */
export function isRegistered(t: ArrayBufferView): boolean {
  return !!arena && t.buffer === arena.memory && t.byteOffset >= arena.base;
}

/** Gives back a tensor from memAlloc (an ordinary one is left to the garbage collector). */
export function memFree(t: Float32Array): void {
  if (!arena || t.buffer !== arena.memory) return;
  if (t.byteOffset < arena.base) throw new Error('memFree of a tensor that memAlloc did not return');
  arena.alloc.release(t.byteOffset - arena.base, t.byteLength);
}
