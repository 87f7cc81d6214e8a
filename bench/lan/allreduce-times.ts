// bench:lan-link's all-reduce row from the ranks' own clocks. Every rank records, per
// iteration, when it called the all-reduce and when it had the result, in ms on the host's
// monotonic clock (the namespaced machines of bench/lan are namespaces of one host, so the
// ranks' times compare directly).
//
//   time_ms       from the last rank's call to the last rank's result: the collective's own time
//   own_time_ms   the slowest rank's time from its own call (what earlier reports called time_ms)
//   call_skew_ms  from the first rank's call to the last one's
// each the median over iterations, and
//   loop_time_ms  the whole back-to-back loop over its iterations, from the first rank's first call
//                 to the last rank's last result (how nccl-tests time a collective)
// A rank that calls d ms late waits less (its peers' data is
// already on the wire) and its peers wait d ms longer: own_time_ms charges that wait to the
// collective, time_ms does not. Back to back the wait does not heal: the late rank finishes d ms
// early and calls the next all-reduce first (see bench/lan-link.ts for what was measured).
import { median, round as roundTo } from '../../common/stats.js';

/** one rank's calls and results for one size, ms on the shared monotonic clock */
export interface RankTimes {
  bytes: number;
  starts: number[];
  ends: number[];
}

export { median };
/** three decimals, as this bench's JSON keeps its times */
export const round = (x: number, d = 3) => roundTo(x, d);

/** The JSON row of a world-`ranks.length` all-reduce over links shaped to `rateBitsPerS`. */
export function allReduceRow(ranks: RankTimes[], rateBitsPerS: number) {
  const n = ranks.length;
  const { bytes, starts } = ranks[0]!;
  if (ranks.some((r) => r.bytes !== bytes || r.starts.length !== starts.length || r.ends.length !== starts.length))
    throw new Error(`all-reduce times of ${bytes} B: the ranks reported different sizes or iteration counts`);
  const perIter = (f: (k: number) => number) => median(starts.map((_, k) => f(k)));
  const max = (f: (r: RankTimes) => number) => Math.max(...ranks.map(f));
  const min = (f: (r: RankTimes) => number) => Math.min(...ranks.map(f));
  const ms = perIter((k) => max((r) => r.ends[k]!) - max((r) => r.starts[k]!));
  const ownMs = perIter((k) => max((r) => r.ends[k]! - r.starts[k]!));
  const skewMs = perIter((k) => max((r) => r.starts[k]!) - min((r) => r.starts[k]!));
  // the whole loop, as nccl-tests time it: from the first rank's first call to the last rank's last result, over the
  // iterations (back to back, a late call's wait counts only where it leaves the link idle)
  const iters = starts.length;
  const loopMs = (max((r) => r.ends[iters - 1]!) - min((r) => r.starts[0]!)) / iters;
  // a ring all-reduce moves 2(n-1)/n of the tensor over every link (busbw, as nccl-tests)
  const busBytes = (bytes * 2 * (n - 1)) / n;
  const use = (t: number) => (busBytes * 8) / (t / 1000) / rateBitsPerS;
  return {
    op: 'allreduce',
    world: n,
    bytes,
    time_ms: round(ms, 2),
    busbw_gbps: round((busBytes * 8) / (ms / 1000) / 1e9),
    link_min_ms: round(((busBytes * 8) / rateBitsPerS) * 1000, 2),
    link_use: round(use(ms)),
    own_time_ms: round(ownMs, 2),
    own_link_use: round(use(ownMs)),
    call_skew_ms: round(skewMs, 2),
    loop_time_ms: round(loopMs, 2),
    loop_link_use: round(use(loopMs)),
  };
}
