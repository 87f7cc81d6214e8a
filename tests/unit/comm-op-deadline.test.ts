// An operation's deadline counts from its last progress, not from its post (algorithms/op.ts): a
// collective whose frames keep arriving may run longer than the deadline (GPT-2 medium's
// gradients around a 4-rank ring at 1 Gbit/s needed SHARDWISE_COMM_TIMEOUT_MS raised), while
// one that stops receiving still fails `timeoutMs` after its last frame, naming the silent peer.
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { Op, type OpHost } from '../../workers/comm/algorithms/op.js';
import type { CommError } from '../../workers/comm/errors.js';
import type { FrameHeader } from '../../workers/comm/transport/frames.js';

const CHECK = 0x5eed;

/** Expects `frames` header-only frames from group rank 1 and is done with the last one. */
class Receive extends Op<number> {
  constructor(
    g: OpHost,
    timeoutMs: number,
    private readonly frames: number,
  ) {
    super(g, { name: 'recv-test', seq: 7, check: CHECK, bytes: 0, algorithm: 'test', dtype: 'float32', timeoutMs });
  }
  start() {
    this.expect(1, this.frames);
  }
  protected onFrame() {
    if (this.waitingOn().length === 0) this.done(this.frames);
  }
}

function host(): OpHost & { op?: Op<unknown> } {
  const h: OpHost & { op?: Op<unknown> } = {
    id: 1,
    name: 'test',
    rank: 0,
    size: 2,
    ranks: [0, 1],
    conn: () => {
      throw new Error('no links in this test');
    },
    abort: (err: CommError) => h.op?._fail(err),
    finished: () => {},
  };
  return h;
}

const frame = (step: number): FrameHeader => ({
  kind: 1, // FrameKind.Collective
  dtype: 'float32',
  flags: 0,
  frameSeq: step,
  group: 1,
  seq: 7,
  step,
  offset: 0,
  bytes: 0,
  check: CHECK,
});

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

it('4 frames 600 ms apart under a 1000 ms deadline: the 1800 ms operation completes', async () => {
  const h = host();
  const op = new Receive(h, 1000, 4);
  h.op = op as Op<unknown>;
  op.start();
  for (let i = 0; i < 4; i++) {
    if (i > 0) await vi.advanceTimersByTimeAsync(600);
    expect(op.work.isCompleted(), `pending before frame ${i}`).toBe(false);
    op.deliver(1, frame(i), Buffer.alloc(0));
  }
  await expect(op.work.wait()).resolves.toBe(4);
});

it('a peer that goes silent after 2 of 4 frames: the operation fails 1000 ms after the last frame, not before, naming rank 1', async () => {
  const h = host();
  const op = new Receive(h, 1000, 4);
  h.op = op as Op<unknown>;
  op.start();
  op.deliver(1, frame(0), Buffer.alloc(0));
  await vi.advanceTimersByTimeAsync(700);
  op.deliver(1, frame(1), Buffer.alloc(0));
  await vi.advanceTimersByTimeAsync(999);
  expect(op.work.isCompleted(), '999 ms after the last frame').toBe(false);
  await vi.advanceTimersByTimeAsync(1);
  expect(op.work.isCompleted(), '1000 ms after the last frame').toBe(true);
  const err = op.work.exception()!;
  expect(err.code).toBe('timeout');
  expect(err.peer).toBe(1);
  expect(err.message).toMatch(/after 1000 ms without progress \(deadline\) waiting for data from peer rank 1/);
});
