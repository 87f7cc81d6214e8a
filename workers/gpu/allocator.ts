// One allocator for every GPU buffer of a rank. WebGPU has no memory query API, so the bytes
// counted here are the dashboard's per-GPU memory: each buffer is tagged with a category and
// the allocator keeps current and peak bytes per category, the way PyTorch separates
// memory_allocated (live tensors) from memory_reserved (buffers held, arenas included).
//
// Arenas are the seeds' "memory defragmentation": a few large contiguous buffers that hand
// out 256-byte-aligned slices (WebGPU's minStorageBufferOffsetAlignment), so long-lived
// tensors (flat parameters, gradients, optimizer state) sit next to each other and the
// working set cannot fragment.
import type { MemoryCategory } from '../../common/memory-categories.js';
import { MEMORY_CATEGORIES } from '../../common/memory-categories.js';
import { SLOT_BYTES } from '../../common/padding.js';
import { bytesPerElement, type StoragePrecision } from './precision.js';

export type { MemoryCategory, StoragePrecision };
export { MEMORY_CATEGORIES };

/** WebGPU's minStorageBufferOffsetAlignment: every slice starts on it (common/padding.ts: the flat layouts' slot) */
export const SLICE_ALIGN = SLOT_BYTES;

export interface GpuTensor {
  readonly name: string;
  readonly category: MemoryCategory;
  readonly buffer: GPUBuffer;
  readonly byteOffset: number;
  /** bytes of content (numel * bytes per element), not the aligned slot */
  readonly byteLength: number;
  readonly numel: number;
  readonly shape: readonly number[];
  readonly arena?: Arena;
  /** storage of each element (precision.ts); absent = fp32, 4 bytes */
  readonly precision?: StoragePrecision;
}

/** The storage precision of a tensor (fp32 unless it says otherwise). */
export const precisionOf = (t: { precision?: StoragePrecision }): StoragePrecision => t.precision ?? 'fp32';

/** Bytes per element of a tensor. */
export const elementBytes = (t: { precision?: StoragePrecision }): 2 | 4 => bytesPerElement(precisionOf(t));

export interface CategoryStats {
  allocated: number;
  reserved: number;
  peakAllocated: number;
  peakReserved: number;
}

export interface MemoryStats {
  byCategory: Record<MemoryCategory, CategoryStats>;
  allocated: number;
  reserved: number;
  peakAllocated: number;
  peakReserved: number;
  /** 1 - largest free block / total free bytes, over all arenas (0 = no fragmentation) */
  fragmentation: number;
  arenas: { name: string; category: MemoryCategory; capacity: number; used: number; largestFree: number }[];
}

export class OutOfMemoryError extends Error {
  override name = 'OutOfMemoryError';
}

const numelOf = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const alignUp = (n: number, a: number) => Math.ceil(n / a) * a;

/** The slot of a slice of `bytes`: whole `slotBytes` (a multiple of SLICE_ALIGN), at least one. */
function slotSize(bytes: number, slotBytes: number): number {
  checkSlot(slotBytes);
  return Math.max(slotBytes, alignUp(bytes, slotBytes));
}

function checkSlot(slotBytes: number) {
  if (slotBytes % SLICE_ALIGN !== 0 || slotBytes <= 0)
    throw new Error(`arena slots of ${slotBytes} bytes: a slot must be a positive multiple of ${SLICE_ALIGN} bytes`);
}
const USAGE = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

export class Allocator {
  private readonly cats: Record<MemoryCategory, CategoryStats>;
  private readonly arenaList: Arena[] = [];
  private live = new Set<GpuTensor>();
  private peakAllocatedTotal = 0;
  private peakReservedTotal = 0;

  constructor(
    readonly device: GPUDevice,
    /** the adapter's maxBufferSize / maxStorageBufferBindingSize: a tensor beyond them cannot exist */
    readonly maxBufferSize = Number(device.limits.maxBufferSize),
    readonly maxBindingSize = Number(device.limits.maxStorageBufferBindingSize),
  ) {
    this.cats = Object.fromEntries(
      MEMORY_CATEGORIES.map((c) => [c, { allocated: 0, reserved: 0, peakAllocated: 0, peakReserved: 0 }]),
    ) as Record<MemoryCategory, CategoryStats>;
  }

  private checkSize(name: string, bytes: number) {
    if (bytes > this.maxBindingSize || bytes > this.maxBufferSize) {
      throw new OutOfMemoryError(
        `${name} needs ${bytes} bytes but this adapter allows at most ${Math.min(this.maxBindingSize, this.maxBufferSize)} bytes per buffer; use a smaller model (fewer layers, smaller d_model or vocab) or a strategy that shards it`,
      );
    }
  }

  private createBuffer(name: string, bytes: number): GPUBuffer {
    this.checkSize(name, bytes);
    this.device.pushErrorScope('out-of-memory');
    const buffer = this.device.createBuffer({ label: name, size: Math.max(4, alignUp(bytes, 4)), usage: USAGE() });
    void this.device.popErrorScope().then((e) => {
      if (e) process.stderr.write(`shardwise: out of GPU memory allocating ${name} (${bytes} bytes)\n`);
    });
    return buffer;
  }

  private account(category: MemoryCategory, allocatedDelta: number, reservedDelta: number) {
    const c = this.cats[category];
    c.allocated += allocatedDelta;
    c.reserved += reservedDelta;
    c.peakAllocated = Math.max(c.peakAllocated, c.allocated);
    c.peakReserved = Math.max(c.peakReserved, c.reserved);
    let a = 0;
    let r = 0;
    for (const k of MEMORY_CATEGORIES) {
      a += this.cats[k].allocated;
      r += this.cats[k].reserved;
    }
    this.peakAllocatedTotal = Math.max(this.peakAllocatedTotal, a);
    this.peakReservedTotal = Math.max(this.peakReservedTotal, r);
  }

  /** A standalone buffer holding one tensor of this shape (float32 unless `precision` says otherwise). */
  tensor(name: string, category: MemoryCategory, shape: readonly number[], precision: StoragePrecision = 'fp32'): GpuTensor {
    const numel = numelOf(shape);
    const byteLength = numel * bytesPerElement(precision);
    const buffer = this.createBuffer(name, byteLength);
    const t: GpuTensor = { name, category, buffer, byteOffset: 0, byteLength, numel, shape: [...shape], ...withPrecision(precision) };
    this.live.add(t);
    this.account(category, byteLength, buffer.size);
    return t;
  }

  /** A contiguous arena of `capacity` bytes from which `Arena.alloc` hands out aligned slices. */
  arena(name: string, category: MemoryCategory, capacity: number): Arena {
    const cap = Math.max(SLICE_ALIGN, alignUp(capacity, SLICE_ALIGN));
    const buffer = this.createBuffer(name, cap);
    const a = new Arena(this, name, category, buffer, cap);
    this.arenaList.push(a);
    this.account(category, 0, cap);
    return a;
  }

  /**
   * Bytes an arena needs to hold these shapes back to back (at this storage precision, each in a
   * slot that is a multiple of `slotBytes`, a multiple of SLICE_ALIGN: Arena.alloc).
   */
  static arenaBytesFor(shapes: readonly (readonly number[])[], precision: StoragePrecision = 'fp32', slotBytes = SLICE_ALIGN): number {
    checkSlot(slotBytes);
    return shapes.reduce((s, sh) => s + alignUp(numelOf(sh) * bytesPerElement(precision), slotBytes), 0);
  }

  free(t: GpuTensor) {
    if (t.arena) {
      t.arena.free(t);
      return;
    }
    if (!this.live.delete(t)) return;
    this.account(t.category, -t.byteLength, -t.buffer.size);
    t.buffer.destroy();
  }

  destroyArena(a: Arena) {
    const i = this.arenaList.indexOf(a);
    if (i < 0) return;
    this.arenaList.splice(i, 1);
    this.account(a.category, -a.used, -a.capacity);
    a.buffer.destroy();
  }

  /** @internal arena bookkeeping */
  _arenaAccount(category: MemoryCategory, allocatedDelta: number) {
    this.account(category, allocatedDelta, 0);
  }

  stats(): MemoryStats {
    const byCategory = Object.fromEntries(MEMORY_CATEGORIES.map((c) => [c, { ...this.cats[c] }])) as Record<MemoryCategory, CategoryStats>;
    let allocated = 0;
    let reserved = 0;
    for (const c of MEMORY_CATEGORIES) {
      allocated += byCategory[c].allocated;
      reserved += byCategory[c].reserved;
    }
    let free = 0;
    let largest = 0;
    for (const a of this.arenaList) {
      free += a.capacity - a.usedSlots;
      largest += a.largestFree();
    }
    return {
      byCategory,
      allocated,
      reserved,
      peakAllocated: this.peakAllocatedTotal,
      peakReserved: this.peakReservedTotal,
      fragmentation: free > 0 ? 1 - largest / free : 0,
      arenas: this.arenaList.map((a) => ({
        name: a.name,
        category: a.category,
        capacity: a.capacity,
        used: a.used,
        largestFree: a.largestFree(),
      })),
    };
  }

  /** Start a new peak window (per step, per phase). */
  resetPeaks() {
    let a = 0;
    let r = 0;
    for (const c of MEMORY_CATEGORIES) {
      const s = this.cats[c];
      s.peakAllocated = s.allocated;
      s.peakReserved = s.reserved;
      a += s.allocated;
      r += s.reserved;
    }
    this.peakAllocatedTotal = a;
    this.peakReservedTotal = r;
  }

  destroyAll() {
    for (const t of [...this.live]) this.free(t);
    for (const a of [...this.arenaList]) this.destroyArena(a);
  }
}

interface Block {
  offset: number;
  size: number;
}

/** First-fit arena with coalescing free list. */
export class Arena {
  /** content bytes of live slices */
  used = 0;
  /** aligned bytes of live slices */
  usedSlots = 0;
  private freeList: Block[];
  private slots = new Map<GpuTensor, Block>();

  constructor(
    private readonly owner: Allocator,
    readonly name: string,
    readonly category: MemoryCategory,
    readonly buffer: GPUBuffer,
    readonly capacity: number,
  ) {
    this.freeList = [{ offset: 0, size: capacity }];
  }

  /**
   * A slice of `shape` in a slot of a whole number of `slotBytes` (a multiple of SLICE_ALIGN):
   * mixed precision lays its fp32 master weights and moments out like the 16-bit parameters,
   * whose 256-byte slots hold twice the elements, so those arenas take 512-byte slots.
   */
  alloc(name: string, shape: readonly number[], precision: StoragePrecision = 'fp32', slotBytes = SLICE_ALIGN): GpuTensor {
    const numel = numelOf(shape);
    const byteLength = numel * bytesPerElement(precision);
    const slot = slotSize(byteLength, slotBytes);
    const i = this.freeList.findIndex((b) => b.size >= slot);
    if (i < 0) {
      throw new OutOfMemoryError(
        `arena ${this.name} (${this.capacity} bytes, ${this.capacity - this.usedSlots} free, largest free block ${this.largestFree()}) cannot hold ${name} (${byteLength} bytes); raise its size`,
      );
    }
    const b = this.freeList[i]!;
    const block = { offset: b.offset, size: slot };
    b.offset += slot;
    b.size -= slot;
    if (b.size === 0) this.freeList.splice(i, 1);
    const t: GpuTensor = {
      name,
      category: this.category,
      buffer: this.buffer,
      byteOffset: block.offset,
      byteLength,
      numel,
      shape: [...shape],
      arena: this,
      ...withPrecision(precision),
    };
    this.slots.set(t, block);
    this.used += byteLength;
    this.usedSlots += slot;
    this.owner._arenaAccount(this.category, byteLength);
    return t;
  }

  free(t: GpuTensor) {
    const block = this.slots.get(t);
    if (!block) return;
    this.slots.delete(t);
    this.used -= t.byteLength;
    this.usedSlots -= block.size;
    this.owner._arenaAccount(this.category, -t.byteLength);
    this.freeList.push(block);
    this.freeList.sort((x, y) => x.offset - y.offset);
    const merged: Block[] = [];
    for (const f of this.freeList) {
      const last = merged[merged.length - 1];
      if (last && last.offset + last.size === f.offset) last.size += f.size;
      else merged.push({ ...f });
    }
    this.freeList = merged;
  }

  largestFree(): number {
    return this.freeList.reduce((m, b) => Math.max(m, b.size), 0);
  }
}

/**
 * A window onto existing GPU memory (a range spanning several arena slices, say) for binding
 * to a kernel. Views allocate nothing, so they never change the memory figures.
 */
export function viewOf(
  base: { buffer: GPUBuffer; byteOffset: number; category: MemoryCategory; precision?: StoragePrecision },
  name: string,
  elemOffset: number,
  numel: number,
): GpuTensor {
  const e = elementBytes(base);
  const byteOffset = base.byteOffset + elemOffset * e;
  if (byteOffset % SLICE_ALIGN !== 0) throw new Error(`view ${name} starts at byte ${byteOffset}, not a multiple of ${SLICE_ALIGN}`);
  return {
    name,
    category: base.category,
    buffer: base.buffer,
    byteOffset,
    byteLength: numel * e,
    numel,
    shape: [numel],
    ...withPrecision(precisionOf(base)),
  };
}

/** fp32 tensors carry no precision field (the default), so existing tensors compare as before. */
function withPrecision(p: StoragePrecision): { precision?: StoragePrecision } {
  return p === 'fp32' ? {} : { precision: p };
}
