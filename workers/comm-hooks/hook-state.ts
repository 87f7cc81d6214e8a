// Every rank's hook state on rank 0, for the checkpoint it writes: PowerSGD's error feedback is
// each rank's own (its gradients' residue), so the checkpoint holds one state per data-parallel
// rank. Each rank flattens its state (the iteration, then its tensors in name order) into one
// float32 block and rank 0 gathers the blocks. The tensors' names and sizes follow from the bucket
// layout, the same on every rank; rank 0 sends its own sizes first so every block is cut the same
// way and a rank whose state differs fails the gather by its size, not by a wrong split.
import type { ProcessGroup } from '../comm/index.js';
import type { HookState } from './hook.js';

const byName = (s: HookState) => [...s.tensors].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** Collective over `pg`: every rank's state on rank 0 (in rank order), null on the others. */
export async function gatherHookStates(
  pg: ProcessGroup,
  s: HookState,
  labels: Record<string, string | number> = {},
): Promise<HookState[] | null> {
  const mine = byName(s);
  const elems = 1 + mine.reduce((a, [, t]) => a + t.length, 0);
  // the count as two 16-bit halves: float32 holds integers exactly only up to 2^24
  const size = Float32Array.of(Math.floor(elems / 65536), elems % 65536);
  await pg.broadcast(size, { root: 0, labels: { what: 'checkpoint hook state size', ...labels } }).wait();
  const expected = size[0]! * 65536 + size[1]!;
  if (expected !== elems)
    throw new Error(
      `rank ${pg.rank}'s gradient-compression state has ${elems} values but rank 0's has ${expected}: the ranks' bucket layouts differ`,
    );
  const block = new Float32Array(elems);
  block[0] = s.iter;
  let at = 1;
  for (const [, t] of mine) {
    block.set(t, at);
    at += t.length;
  }
  const all = await pg.gather(block, { root: 0, labels: { what: 'checkpoint hook state', ...labels } }).wait();
  if (!all) return null;
  return Array.from({ length: pg.size }, (_, r) => {
    const b = all.subarray(r * elems, (r + 1) * elems);
    const tensors = new Map<string, Float32Array>();
    let off = 1;
    for (const [name, t] of mine) {
      tensors.set(name, b.slice(off, off + t.length));
      off += t.length;
    }
    return { iter: b[0]!, tensors };
  });
}
