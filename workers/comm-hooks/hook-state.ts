// A compressed run's hook states in its checkpoint. PowerSGD's error feedback is each rank's own
// (its gradients' residue), so the checkpoint holds one state per data-parallel rank, gathered on
// rank 0; a resume under another compression or number of ranks starts the hook fresh (the
// resume in another layout notes it in the run's summary). Each rank flattens its state (the iteration, then its tensors in name order) into one
// float32 block and rank 0 gathers the blocks. The tensors' names and sizes follow from the bucket
// layout, the same on every rank; rank 0 sends its own sizes first so every block is cut the same
// way and a rank whose state differs fails the gather by its size, not by a wrong split.
import { gradCompressionLabel } from '../../common/grad-compression.js';
import { TABLE } from '../../common/strategies.js';
import type { CommHookCheckpoint, RankHookState } from '../checkpoint/checkpoint.js';
import type { ProcessGroup } from '../comm/index.js';
import { DEFAULT_PARALLEL, type TrainJob } from '../protocol/train.js';
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

/** The data-parallel ranks of a job: each keeps its own hook state. */
const replicasOf = (job: TrainJob) => {
  const par = job.parallel ?? DEFAULT_PARALLEL;
  return TABLE[par.strategy].grid(par).dp;
};

/** A compressed run's record: its setting and every rank's state (a stateless hook, fp16 or bf16, records the setting alone). */
export function hookRecord(job: TrainJob, hooks: RankHookState[] | undefined): CommHookCheckpoint | undefined {
  const setting = job.parallel?.grad_compression;
  if (!setting || setting.hook === 'none') return undefined;
  return { setting, ranks: hooks ?? Array.from({ length: replicasOf(job) }, () => ({ iter: 0, tensors: new Map() })) };
}

/**
 * The hook states a resumed rank continues from: the checkpoint's, when the job compresses its
 * gradients the same way over as many data-parallel ranks. Otherwise none, and the hook starts
 * fresh: a checkpoint of an uncompressed run, or a resume in another layout or compression
 * (PowerSGD's error feedback is each rank's residue of its own gradients, its warm-start Q is
 * per bucket: neither has a meaning on other ranks). A job differs from its checkpoint's only
 * through a resume in another layout (src-main/launch/relayout.ts), which says so in the run's
 * notes; the rank does not refuse what the user asked for.
 */
export function resumedHookStates(saved: CommHookCheckpoint | undefined, job: TrainJob): RankHookState[] | null {
  if (!saved) return null;
  const same = gradCompressionLabel(saved.setting) === gradCompressionLabel(job.parallel?.grad_compression);
  return same && saved.ranks.length === replicasOf(job) ? saved.ranks : null;
}
