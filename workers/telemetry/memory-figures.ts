// Memory figures of a rank in the shape the run summary and the dashboard use: bytes per
// category, now or at their peaks, plus the reserved total (arenas included).
import { MEMORY_CATEGORIES } from '../../common/memory-categories.js';
import type { Allocator } from '../gpu/allocator.js';

function bytes(a: Allocator, which: 'now' | 'peak'): Record<string, number> {
  const s = a.stats();
  const out: Record<string, number> = {};
  for (const c of MEMORY_CATEGORIES) out[c] = which === 'now' ? s.byCategory[c].allocated : s.byCategory[c].peakAllocated;
  if (which === 'now') {
    out.reserved = s.reserved;
    out.fragmentation = s.fragmentation;
  } else {
    out.total = s.peakAllocated;
    out.reserved = s.peakReserved;
  }
  return out;
}

export const currentBytes = (a: Allocator) => bytes(a, 'now');
export const peakBytes = (a: Allocator) => bytes(a, 'peak');
