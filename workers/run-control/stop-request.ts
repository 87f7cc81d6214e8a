// A rank's stop request: SIGTERM (from its controller's Stop or Ctrl-C, from its agent, or from a
// user's `kill`) asks the rank to finish the step it is in, write a checkpoint of it and exit 0,
// so a stopped run is always resumable. Until the training loop starts there is no step to
// finish: a SIGTERM then ends the process at once, as a default handler would (a rank waiting in
// the rendezvous for peers that were never started must not sit out the grace period).

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

/** The loop stopped early after `step`, its checkpoint written. */
export function markStopped(step: number): void {
  stoppedAt = step;
}

/** The step this rank stopped after (its checkpoint's), or null when it ran to the end. */
export function stoppedAfter(): number | null {
  return stoppedAt;
}

/** tests: back to a fresh process's state */
export function resetStopRequest(): void {
  armed = requested = false;
  stoppedAt = null;
}

/** tests: as a SIGTERM would */
export function requestStop(): void {
  requested = true;
}
