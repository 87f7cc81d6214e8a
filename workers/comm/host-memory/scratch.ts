// Receive buffers for pieces that are reduced (or forwarded) rather than kept: ring
// reduce-scatter pieces and chain reduce pieces, shared by all operations of the process. The
// SIMD kernels' own memory comes first (simd.ts: a piece there is reduced without a staging
// copy), then a small pool of plain buffers. A piece is received into one (by the kernel, see
// TcpLink), reduced, forwarded from it and given back once the link has flushed it, so steady
// state allocates nothing. Pooled by size (one piece); a few are kept per size, since the send
// window bounds how many are out at once.
import { giveResident, isResident, takeResident } from './simd.js';

const POOL_KEEP = 32;
const pool = new Map<number, Buffer[]>();

/** A buffer of at least `bytes` (exactly `bytes`, or a larger resident slot); aligned for any dtype. */
export function takeScratch(bytes: number): Buffer {
  return takeResident(bytes) ?? pool.get(bytes)?.pop() ?? Buffer.allocUnsafeSlow(bytes);
}

/** Gives back a buffer from takeScratch once nothing reads or writes it any more. */
export function giveScratch(b: Buffer): void {
  if (isResident(b)) return giveResident(b);
  let free = pool.get(b.length);
  if (!free) pool.set(b.length, (free = []));
  if (free.length < POOL_KEEP) free.push(b);
}
