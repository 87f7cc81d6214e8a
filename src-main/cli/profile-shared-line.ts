// How `shardwise profile` words one whole-step measurement of k processes sharing an adapter. It
// holds two ratios that used to print bare side by side (x1.03 and x0.96): the k processes'
// throughput together over one alone, each running its own micro-batch; and the whole batch split
// over the k against one process running all of it (what k ranks on this adapter get over one).
// Each is named where it is printed.
import type { SharedTiming } from '../../common/advisor/profile.js';

const ms = (v: number | undefined) => (v === undefined ? '?' : `${v.toFixed(1)} ms`);

export function sharedStepLine(x: SharedTiming): string {
  const together =
    `${x.k} at once: throughput x${x.speedup.toFixed(2)} of one alone ` +
    `(each its own micro-batch of ${x.batch ?? '?'}: ${ms(x.shared_ms)} each at once, ${ms(x.alone_ms)} alone)`;
  // the k processes through the whole batch: its micro-batches split over them, one step each
  const split = x.shared_ms !== undefined && x.batch && x.whole_batch ? (x.shared_ms * x.whole_batch) / (x.k * x.batch) : undefined;
  const whole =
    split !== undefined && x.whole_batch_ms !== undefined
      ? `; the batch of ${x.whole_batch} split over the ${x.k}: ${ms(split)} against ${ms(x.whole_batch_ms)} by one, x${(x.whole_batch_ms / split).toFixed(2)} its speed`
      : '';
  return `${x.shape.padEnd(24)} ${together}${whole}`;
}
