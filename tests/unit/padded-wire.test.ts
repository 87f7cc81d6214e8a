// An emulated shape's gradient buckets (workers/gpu/padded-wire.ts) between two real ranks over
// loopback: the sum is the plain one, the bytes on the wire are the shape's, buckets in flight
// together keep their own padding, and the rest of the group is the group itself.
import { expect, it } from 'vitest';
import { bfloat16ToFloat, floatToBfloat16, type ProcessGroup } from '../../workers/comm/index.js';
import { paddedAllReduce } from '../../workers/gpu/padded-wire.js';
import { withLoopbackWorld } from './loopback-world.js';

const groups = withLoopbackWorld(2);

const sent = (pg: ProcessGroup, peer: number) => pg.peerBytes().find((p) => p.peer === peer)?.sent ?? 0;
/** rank r's gradients of bucket b at step s */
const grads = (n: number, r: number, b: number, s: number) =>
  Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.1 + r + 3 * b + 7 * s));

it('a padded bucket all-reduce sums exactly as the plain one, sends its scale in bytes, and returns the caller its own buffer', async () => {
  const g = groups();
  const n = 4096;
  const scale = 6.5;
  const padded = g.map((pg) => paddedAllReduce(pg, scale));
  const before = sent(g[0]!, 1);
  for (let step = 0; step < 2; step++) {
    // two buckets of one length in flight at once: each keeps its own padded buffer
    const bufs = [0, 1].map((r) => [0, 1].map((b) => grads(n, r, b, step)));
    const works = [0, 1].flatMap((r) => [0, 1].map((b) => padded[r]!.allReduce(bufs[r]![b]!, { op: 'sum', labels: { bucket: b } })));
    const got = await Promise.all(works.map((w) => w.wait()));
    expect(got[0], 'wait() gives back the buffer the caller posted').toBe(bufs[0]![0]);
    for (const r of [0, 1])
      for (const b of [0, 1]) {
        const want = grads(n, 0, b, step).map((x, i) => x + grads(n, 1, b, step)[i]!);
        expect(bufs[r]![b], `rank ${r} bucket ${b} step ${step}: the sum of the real gradients, padding left out`).toEqual(want);
      }
  }
  // 2 steps x 2 buckets of n floats padded to round(n * scale); world 2 sends about one payload each way
  const plainBytes = 2 * 2 * n * 4;
  const ratio = (sent(g[0]!, 1) - before) / plainBytes;
  expect(Math.abs(ratio / scale - 1), `bytes sent ${ratio.toFixed(3)}x the real ones, scale ${scale}`).toBeLessThan(0.02);
});

it('16-bit buckets pad as 16-bit payloads; a scale of 1 or less is the group itself, and its other collectives pass through', async () => {
  const g = groups();
  const n = 1000;
  const a = Uint16Array.from({ length: n }, (_, i) => floatToBfloat16(i / 8));
  const b = Uint16Array.from({ length: n }, () => floatToBfloat16(1));
  const padded = g.map((pg) => paddedAllReduce(pg, 3));
  await Promise.all([
    padded[0]!.allReduce(a, { op: 'sum', dtype: 'bfloat16', labels: { bucket: 0 } }).wait(),
    padded[1]!.allReduce(b, { op: 'sum', dtype: 'bfloat16', labels: { bucket: 0 } }).wait(),
  ]);
  for (const i of [0, 1, 8, 999]) expect(bfloat16ToFloat(a[i]!)).toBe(bfloat16ToFloat(floatToBfloat16(i / 8 + 1)));
  expect(a).toEqual(b);

  expect(paddedAllReduce(g[0]!, 1)).toBe(g[0]);
  expect(padded[1]!.rank).toBe(1);
  const x = [new Float32Array([1, 2, 3]), new Float32Array(3)];
  await Promise.all(padded.map((pg, r) => pg.broadcast(x[r]!, { root: 0 }).wait()));
  expect(Array.from(x[1]!)).toEqual([1, 2, 3]);
});
