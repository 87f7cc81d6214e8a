// A rank's stop request: SIGTERM (from its controller's Stop or Ctrl-C, from its agent, or from a
// user's `kill`) asks the rank to finish the step it is in, write a checkpoint of it and exit 0,
// so a stopped run is always resumable. Until the training loop starts there is no step to
// finish: a SIGTERM then ends the process at once, as a default handler would (a rank waiting in
// the rendezvous for peers that were never started must not sit out the grace period).
import type { RankMessage } from '../protocol/train.js';

let armed = false;
let requested = false;
let stoppedAt: number | null = null;

function onTerm() {
  if (armed) {
    requested = true;
    return;
  }
  process.off('SIGTERM', onTerm);
  process.kill(process.pid, 'SIGTERM');
}

/** Route SIGTERM to a stop request (rank-main, once per process). */
export function listenForStop(): void {
  process.on('SIGTERM', onTerm);
}

/** The loop is running: from now on a SIGTERM waits for the end of the step. */
export function armStop(): void {
  armed = true;
}

/** Has this rank been asked to stop? */
export function stopRequested(): boolean {
  return requested;
}

/** The ranks agreed to stop after `step` (its checkpoint is written before the loop ends). */
export function markStopped(step: number): void {
  stoppedAt = step;
}

/** After the loop: a rank that stopped early says so, and at which step (its checkpoint's). */
export async function reportStop(rank: number, send: (m: RankMessage) => Promise<void>): Promise<void> {
  if (stoppedAt !== null) await send({ type: 'stopped', rank, step: stoppedAt, requested });
}
