// Launchers of powersgd-feedback.wgsl: PowerSGD's error feedback over a DDP bucket on the device.
// Width 4 (source.ts) when n % 4 == 0 and both slices are 16-byte aligned.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel } from './source.js';
import { assertNoAliasing, assertSize, grid, precisionFor, storageWidth } from './util.js';

export interface FeedbackArgs {
  /** the bucket's gradients (n), fp32 */
  x: GpuTensor;
  /** its error memory (n), fp32 */
  e: GpuTensor;
  n: number;
  /** the data-parallel world size */
  world: number;
  /** use_error_feedback: off, feedIn only scales x and e is untouched */
  feedback: boolean;
}

/** feedIn: x = x·world + e and e = x (feedback on), or x = x·world; residual: e = e − x. */
export function powerSgdFeedback(rt: Runtime, { x, e, n, world, feedback }: FeedbackArgs): { feedIn: Dispatch[]; residual: Dispatch[] } {
  const op = 'powerSgdFeedback';
  assertSize(op, 'x', x, n);
  assertSize(op, 'e', e, n);
  assertNoAliasing(op, { x, e }, {});
  if (n === 0) return { feedIn: [], residual: [] };
  const p = precisionFor(op, { x, e });
  if (p !== 'fp32') throw new Error(`${op}: PowerSGD compresses fp32 gradients; ${x.name} is ${p}`);
  const w = storageWidth(op, p, n, x, e);
  const params = packParams([n / w, { f32: world }, feedback ? 1 : 0, 0]);
  const launch = (entry: string) =>
    rt.prepare(`powerSgd ${entry} ${n}`, kernel(rt, w, 'powersgd-feedback', entry), [x, e], params, grid(rt, n / w / 256));
  return { feedIn: [launch('feed_in')], residual: feedback ? [launch('residual')] : [] };
}
