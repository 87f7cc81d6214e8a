// Memory figures of a rank in the shape the run summary and the dashboard use.
import { MEMORY_CATEGORIES } from '../../common/memory.js';
import type { Allocator } from '../gpu/allocator.js';

export function currentBytes(a: Allocator): Record<string, number> {
  const s = a.stats();
  const out: Record<string, number> = {};
  for (const c of MEMORY_CATEGORIES) out[c] = s.byCategory[c].allocated;
  out.reserved = s.reserved;
  out.fragmentation = s.fragmentation;
  return out;
}

export function peakBytes(a: Allocator): Record<string, number> {
  const s = a.stats();
  const out: Record<string, number> = {};
  for (const c of MEMORY_CATEGORIES) out[c] = s.byCategory[c].peakAllocated;
  out.total = s.peakAllocated;
  out.reserved = s.peakReserved;
  return out;
}
