// A rank that posts a collective late finds its peers' pieces already held (early frames). It
// must take them one per event-loop turn, as if they were arriving now, not all in one go:
// reducing ~100 MB of held 16-bit pieces at once blocked a loaded rank's event loop for over
// 15 s, its heartbeats stopped, and its peers declared it lost (bench:lan, GPT-2-medium shape,
// world 4, fp16 hook). Two ranks in this process over loopback TCP.
import { expect, it } from 'vitest';
import { withLoopbackWorld } from './loopback-world.js';

const ONE = 0x3c00; // fp16 1.0
const TWO = 0x4000; // fp16 2.0
const THREE = 0x4200; // fp16 3.0

const groups = withLoopbackWorld(2);

const count = (a: Uint16Array, from: number, to: number, v: number) => {
  let n = 0;
  for (let i = from; i < to; i++) if (a[i] === v) n++;
  return n;
};

it('a late fp16 all-reduce takes its 4 held 2 MiB pieces one per event-loop turn (at most one reduced before the loop turns), and sums right', async () => {
  const g = groups();
  const n = 8 << 20; // fp16 elements; world 2: rank 1 reduces segment 1 (4 Mi elements = 4 pieces of 1 Mi), all sent by rank 0 at step 0
  const piece = 1 << 20;
  const a = new Uint16Array(n).fill(ONE);
  const b = new Uint16Array(n).fill(TWO);
  const w0 = g[0]!.allReduce(a, { op: 'sum' });
  // rank 1 posts only once all of rank 0's step-0 pieces are held on it
  const held = (n / 2) * 2;
  const received = () => g[1]!.peerBytes().find((p) => p.peer === 0)?.received ?? 0;
  for (let t0 = Date.now(); received() < held;) {
    if (Date.now() - t0 > 20_000) throw new Error(`rank 1 received ${received()} of the ${held} bytes rank 0 sends first`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const w1 = g[1]!.allReduce(b, { op: 'sum' });
  // the first turn of the event loop after the post: the old code had reduced every held piece by now
  const reducedAtFirstTurn = await new Promise<number>((r) => setImmediate(() => r(count(b, n / 2, n, THREE))));
  expect(reducedAtFirstTurn, 'held elements reduced before the event loop turned once').toBeLessThanOrEqual(piece);
  await Promise.all([w0.wait(), w1.wait()]);
  expect(count(a, 0, n, THREE), 'rank 0: every element 1 + 2').toBe(n);
  expect(count(b, 0, n, THREE), 'rank 1: every element 1 + 2').toBe(n);
});
