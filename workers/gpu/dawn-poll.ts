// Dawn's Node binding (the `webgpu` package) waits for GPU work (mapAsync, onSubmittedWorkDone,
// requestDevice) by calling its instance's ProcessEvents from a setImmediate loop for as long as
// such a promise is pending: the process's main thread spins at 100% through every wait. On a
// software adapter (SwiftShader: the "GPU" is this CPU's own threads) that spinning thread takes a
// core's share from the threads doing the work it waits for. The binding looks setImmediate up on
// the global object each time it schedules a poll, so wrapping it there turns its loop into a
// POLL_MS timer: the thread sleeps between polls, and a wait ends at most POLL_MS after its work.
// Measured on SwiftShader, 2 cores shared with other work (load 13-21): a 30-step tiny run took
// 36-41 s instead of 76-78 s (20-22 s of CPU instead of 30-32), DDP at world 2 29 s instead of 73;
// the same losses.
import { promisify } from 'node:util';

const POLL_MS = 1;

let installed = false;

/** The binding's poll: a native function without a name, scheduled without arguments (Node's own and JS callers pass JS functions). */
function isDawnPoll(fn: unknown, args: unknown[]): fn is () => void {
  return args.length === 0 && typeof fn === 'function' && fn.name === '' && Function.prototype.toString.call(fn).includes('[native code]');
}

/** From now on in this process, Dawn polls pending GPU work every POLL_MS instead of spinning (idempotent). */
export function sleepBetweenDawnPolls(): void {
  if (installed) return;
  installed = true;
  const immediate = globalThis.setImmediate;
  const wrapped = (fn: (...a: unknown[]) => void, ...args: unknown[]) =>
    isDawnPoll(fn, args) ? setTimeout(fn, POLL_MS) : immediate(fn, ...args);
  Object.defineProperty(wrapped, promisify.custom, { value: (immediate as unknown as Record<symbol, unknown>)[promisify.custom] });
  globalThis.setImmediate = wrapped as unknown as typeof setImmediate;
}
