// bench:lan-link's all-reduce row (bench/lan/allreduce-times.ts), in process: no namespaces needed.
import { describe, expect, it } from 'vitest';
import { allReduceRow, type RankTimes } from '../../bench/lan/allreduce-times.js';

const MiB4 = 4 << 20;
const GBIT = 1e9;
/** a 4 MiB world-2 all-reduce sends 4 MiB each way: 33.55 ms at 1 Gbit/s */
const LINK_MS = ((MiB4 * 8) / GBIT) * 1000;

/**
 * Two ranks calling back to back, as bench:lan-link's ranks do, where each direction's data
 * takes `streamMs` from its sender's call and rank 1 starts `skewMs` late: a rank has the result
 * when its peer's stream has arrived, so the late rank finishes first and calls the next
 * all-reduce first (the skew changes sides and stays).
 */
function backToBack(iters: number, streamMs: number, skewMs: number): RankTimes[] {
  const r = [0, 1].map(() => ({ bytes: MiB4, starts: [] as number[], ends: [] as number[] }));
  let call = [1000, 1000 + skewMs];
  for (let k = 0; k < iters; k++) {
    const ends = [call[1]! + streamMs, call[0]! + streamMs];
    for (const i of [0, 1]) {
      r[i]!.starts.push(call[i]!);
      r[i]!.ends.push(ends[i]!);
    }
    call = ends;
  }
  return r;
}

describe('bench:lan-link: the all-reduce row', () => {
  it("charges a peer's late call to own_time_ms only: time_ms is from the last call to the last result", () => {
    const row = allReduceRow(backToBack(10, 35, 4), GBIT);
    expect(row.link_min_ms).toBeCloseTo(LINK_MS, 2);
    expect(row.call_skew_ms).toBeCloseTo(4, 6);
    expect(row.time_ms).toBeCloseTo(35, 6);
    expect(row.own_time_ms).toBeCloseTo(39, 6);
    expect(row.link_use).toBeCloseTo(LINK_MS / 35, 3);
    expect(row.own_link_use).toBeCloseTo(LINK_MS / 39, 3);
    expect(row.busbw_gbps).toBeCloseTo((MiB4 * 8) / 0.035 / 1e9, 3);
    // the loop as nccl-tests time it: the first skew is paid once over the 10 iterations, not per all-reduce
    expect(row.loop_time_ms).toBeCloseTo((4 + 10 * 35) / 10, 6);
    expect(row.loop_link_use).toBeCloseTo(LINK_MS / 35.4, 3);
  });

  it('calls at the same moment give the same time both ways, and a slow all-reduce is not hidden', () => {
    const r = [0, 1].map(() => ({ bytes: MiB4, starts: [0, 50, 100], ends: [36, 90, 137] }));
    const row = allReduceRow(r, GBIT);
    expect(row.call_skew_ms).toBe(0);
    expect(row.time_ms).toBe(37); // median of 36, 40, 37
    expect(row.own_time_ms).toBe(37);
    // the loop counts the idle time between calls: 137 ms over 3
    expect(row.loop_time_ms).toBeCloseTo(137 / 3, 2);
    // world 4: every link carries 2(n-1)/n = 1.5x the tensor
    expect(allReduceRow([...r, ...r], GBIT).link_min_ms).toBeCloseTo(1.5 * LINK_MS, 2);
  });

  it('ranks that report different iteration counts are an error, not a row', () => {
    const [a, b] = backToBack(3, 35, 1);
    expect(() => allReduceRow([a!, { ...b!, ends: b!.ends.slice(1) }], GBIT)).toThrow(/different sizes or iteration counts/);
  });
});
