// Helpers every kernel launcher shares: pick the element width, fold large 1D grids into
// 2D (maxComputeWorkgroupsPerDimension is 65535 on most adapters), refuse aliased bindings with
// a hint (WebGPU rejects a dispatch whose writable binding overlaps another binding of the
// same buffer, and a rejected dispatch silently invalidates the whole command buffer), and
// hand out per-runtime scratch buffers.
import { type GpuTensor, precisionOf } from '../gpu/allocator.js';
import type { StoragePrecision } from '../gpu/precision.js';
import type { Runtime } from '../gpu/runtime.js';
import type { Width } from './source.js';

/** Workgroup counts for `count` workgroups, folded into (x, y) when x would pass the adapter's limit. */
export function grid(rt: Runtime, count: number): [number, number] {
  const max = Number(rt.limits.maxComputeWorkgroupsPerDimension);
  const n = Math.max(1, Math.ceil(count));
  if (n <= max) return [n, 1];
  const y = Math.ceil(n / max);
  return [Math.ceil(n / y), y];
}

/** True when the two tensors share bytes of one GPUBuffer. */
export function overlaps(a: GpuTensor, b: GpuTensor): boolean {
  if (a.buffer !== b.buffer) return false;
  const aEnd = a.byteOffset + Math.max(4, a.byteLength);
  const bEnd = b.byteOffset + Math.max(4, b.byteLength);
  return a.byteOffset < bEnd && b.byteOffset < aEnd;
}

/** Same tensor (same buffer, same start): the in-place case some kernels support. */
export function sameTensor(a: GpuTensor, b: GpuTensor): boolean {
  return a.buffer === b.buffer && a.byteOffset === b.byteOffset;
}

/**
 * Throw if any two bound tensors overlap. Every binding is declared read_write (arena slices
 * share buffers), so WebGPU treats every pair of overlapping bindings as writable aliasing,
 * inputs included.
 */
export function assertNoAliasing(op: string, written: Record<string, GpuTensor>, others: Record<string, GpuTensor>) {
  const all = Object.entries({ ...others, ...written });
  for (let i = 0; i < all.length; i++) {
    for (let j = i + 1; j < all.length; j++) {
      const [an, a] = all[i]!;
      const [bn, b] = all[j]!;
      if (overlaps(a, b)) {
        const w = an in written ? an : bn;
        throw new Error(
          `${op}: ${an} (${a.name}) overlaps ${bn} (${b.name}) in buffer ${a.buffer.label}; WebGPU rejects a dispatch that binds one range twice (all kernel bindings are read_write). ---> HINT: give ${w} its own slice${op === 'add' ? ', or use addInPlace' : ''}`,
        );
      }
    }
  }
}

/** Width 4 applies: n % 4 == 0 and every tensor starts on a 16-byte boundary. */
export function vec4Ok(n: number, ...ts: GpuTensor[]): boolean {
  return n % 4 === 0 && ts.every((t) => t.byteOffset % 16 === 0);
}

/** The width to compile a kernel at (source.ts): 4 when vec4Ok(n, ...ts), else 1. */
export function widthFor(n: number, ...ts: GpuTensor[]): Width {
  return vec4Ok(n, ...ts) ? 4 : 1;
}

/**
 * The storage precision an op's compute-precision tensors share (the prelude's S, source.ts).
 * One kernel has one S, so mixed storage is refused.
 */
export function precisionFor(op: string, tensors: Record<string, GpuTensor>): StoragePrecision {
  const entries = Object.entries(tensors);
  const [n0, t0] = entries[0]!;
  const p = precisionOf(t0);
  for (const [n, t] of entries) {
    if (precisionOf(t) !== p)
      throw new Error(
        `${op}: ${n0} (${t0.name}) is ${p} but ${n} (${t.name}) is ${precisionOf(t)}; one kernel stores its compute-precision tensors at one precision. ---> HINT: convert one of them first (kernels/cast.ts)`,
      );
  }
  return p;
}

/** A dimension named for error messages: what the caller has to pad. */
export interface Dim {
  name: string;
  n: number;
  /** what to do instead of the default 'pad NAME to a multiple of 4' */
  hint?: string;
}

/**
 * widthFor at a storage precision: 16-bit storage packs 4 elements per S and needs width 4.
 * n: the length the kernel reads in vectors (a row length for row-wise kernels); name it (Dim) so
 * the error says which dimension to pad.
 */
export function storageWidth(op: string, p: StoragePrecision, n: number | Dim, ...ts: GpuTensor[]): Width {
  const d: Dim = typeof n === 'number' ? { name: 'n', n } : n;
  const w = widthFor(d.n, ...ts);
  if (p !== 'fp32' && w !== 4)
    throw new Error(
      `${op}: ${p} tensors are read 4 elements at a time, but ${d.name} = ${d.n} or an offset (${ts.map((t) => `${t.name} at byte ${t.byteOffset}`).join(', ')}) is not a multiple of 4 (16 bytes). ---> HINT: ${d.hint ?? `pad ${d.name === 'n' ? 'the dimension' : d.name} to a multiple of 4`}`,
    );
  return w;
}

/** Throw when a tensor holds fewer elements than the op reads or writes. */
export function assertSize(op: string, name: string, t: GpuTensor, numel: number) {
  if (t.numel < numel) {
    throw new Error(`${op}: ${name} (${t.name}) has ${t.numel} elements but the op needs ${numel}; check the shape arguments`);
  }
  if (numel > 0xffffffff / 4) throw new Error(`${op}: ${name} with ${numel} elements is too large for u32 indexing`);
}

const scratchByRuntime = new WeakMap<Runtime, Map<string, GpuTensor>>();

/**
 * A workspace tensor shared by every launcher of this runtime that asks for the same name and
 * size. Safe because dispatches run in recording order and each launcher's Dispatch[] uses its
 * scratch only between its own first and last dispatch: run a returned Dispatch[] as a unit.
 */
export function scratch(rt: Runtime, name: string, numel: number): GpuTensor {
  let m = scratchByRuntime.get(rt);
  if (!m) {
    m = new Map();
    scratchByRuntime.set(rt, m);
  }
  const key = `${name}:${numel}`;
  let t = m.get(key);
  if (!t) {
    t = rt.allocator.tensor(`kernels.${name}`, 'workspace', [Math.max(1, numel)]);
    m.set(key, t);
  }
  return t;
}
