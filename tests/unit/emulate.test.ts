import { describe, expect, it } from 'vitest';
import { JobError, resolveJob } from '../../src-main/launch/resolve-job.js';
import { EmulatedClock } from '../../workers/gpu/emulated-clock.js';
import { EMULATED_SHAPES, parseEmulateEnv } from '../../workers/protocol/emulate.js';
import { EmulatedDevice } from '../../workers/gpu/emulated-device.js';
import {
  blockForwardFlops,
  emulatedDims,
  passTime,
  sustainedFlopsPerMs,
  timesFromProfile,
  timesFromTflops,
} from '../../workers/gpu/emulated-times.js';
import type { Runtime } from '../../workers/gpu/runtime.js';

/** A clock whose time only moves when the code under test sleeps (or the test advances it). */
function fakeClock(start = 1000) {
  const t = { now: start, slept: [] as number[] };
  const clock = new EmulatedClock(
    () => t.now,
    async (ms) => {
      t.slept.push(ms);
      t.now += ms;
    },
  );
  return { t, clock };
}

describe('emulated device pacing (the in-order queue every readback waits on)', () => {
  it('work recorded back to back queues up: 3 layers of 10 ms recorded at t=1000 end at 1010, 1020, 1030', () => {
    const { clock } = fakeClock();
    expect(clock.enqueue(10)).toEqual({ start: 1000, end: 1010 });
    expect(clock.enqueue(10)).toEqual({ start: 1010, end: 1020 });
    expect(clock.enqueue(10)).toEqual({ start: 1020, end: 1030 });
    expect(clock.end).toBe(1030);
    expect(clock.takeBusyMs()).toBe(30);
    expect(clock.takeBusyMs()).toBe(0);
  });

  it('work recorded after the device went idle starts when it is recorded (after a 50 ms all-reduce, not at the old tail)', () => {
    const { t, clock } = fakeClock();
    clock.enqueue(10); // ends 1010
    t.now = 1060; // the host waited on the network
    expect(clock.enqueue(5)).toEqual({ start: 1060, end: 1065 });
  });

  it('a readback issued mid-queue waits until the emulated device reaches it: real done at 1004, emulated at 1020 -> sleeps 16 ms', async () => {
    const { t, clock } = fakeClock();
    clock.enqueue(20);
    const [until, issued] = [clock.end, t.now];
    t.now = 1004; // the real kernels and the copy finished
    await clock.reach(until, issued);
    expect(t.slept).toEqual([16]);
    expect(t.now).toBe(1020);
    expect([clock.reads, clock.realBound]).toEqual([1, 0]);
  });

  it('when the real kernels come after the emulated device, nothing more is waited and the read counts as real-bound', async () => {
    const { t, clock } = fakeClock();
    clock.enqueue(20);
    const [until, issued] = [clock.end, t.now];
    t.now = 1035;
    await clock.reach(until, issued);
    expect(t.slept).toEqual([]);
    expect([clock.reads, clock.realBound]).toEqual([1, 1]);
  });

  it('a readback with no emulated work pending is not counted (it measures the real copy only)', async () => {
    const { t, clock } = fakeClock();
    clock.enqueue(5);
    t.now = 1100;
    await clock.reach(clock.end, t.now);
    expect([clock.reads, clock.realBound]).toEqual([0, 0]);
  });
});

describe('emulated layer times', () => {
  const d = { B: 4, T: 1024, C: 1024, V: 50257, tp: 1, checkpointing: false };

  it('GPT-2 medium block at B=4, T=1024: 24·N·C² + 4·N·T·C = 120.3 GFLOP forward -> 28.0 ms at 4.3 TFLOP/s, backward twice that', () => {
    expect(blockForwardFlops(d)).toBe(24 * 4096 * 1024 * 1024 + 4 * 4096 * 1024 * 1024);
    const t = timesFromTflops(d, 4.3);
    expect(t.block.forward).toBeCloseTo((120.259084288e9 / 4.3e12) * 1e3, 6);
    expect(t.block.backward).toBeCloseTo(2 * t.block.forward, 9);
    // LM head: 2·N·C·V
    expect(t.head.forward).toBeCloseTo(((2 * 4096 * 1024 * 50257) / 4.3e12) * 1e3, 6);
    expect(t.embedding).toEqual({ forward: 0, backward: 0 });
    expect(t.device).toBe('4.3 TFLOP/s');
  });

  it('overhead per pass, activation checkpointing (backward recomputes forward) and a tensor-parallel split (1/TP of the FLOPs)', () => {
    const base = timesFromTflops(d, 4.3);
    const t = timesFromTflops({ ...d, tp: 2, checkpointing: true }, 4.3, 0.5, 3);
    expect(t.block.forward).toBeCloseTo(base.block.forward / 2 + 0.5, 9);
    expect(t.block.backward).toBeCloseTo((3 * base.block.forward) / 2 + 0.5, 9);
    expect(t.embedding.forward).toBe(0.5);
    expect(t.optimizer).toBe(3);
    expect(passTime(t, 'backward', 'block.7')).toBe(t.block.backward);
    expect(passTime(t, 'forward', 'head')).toBe(t.head.forward);
    expect(passTime(t, 'forward', 'embedding')).toBe(0.5);
  });

  it('a profile measured at 4096 tokens, run at 2 x 1024 tokens, takes half its times', () => {
    const p = {
      device: 'H200 (measured)',
      tokens: 4096,
      layers: {
        embedding: { forward_ms: 0.2, backward_ms: 0.4 },
        block: { forward_ms: 30, backward_ms: 62 },
        head: { forward_ms: 40, backward_ms: 80 },
      },
      optimizer_ms: 6,
    };
    const t = timesFromProfile({ B: 2, T: 1024, tp: 1, checkpointing: false }, p);
    expect(t.block).toEqual({ forward: 15, backward: 31 });
    expect(t.head).toEqual({ forward: 20, backward: 40 });
    expect(t.optimizer).toBe(6);
    expect(t.device).toBe('H200 (measured)');
    const ck = timesFromProfile({ B: 2, T: 1024, tp: 1, checkpointing: true }, p, 1);
    expect(ck.block).toEqual({ forward: 16, backward: 47 });
  });

  it("work outside the layers (a comm hook's math) runs at the device's sustained rate: the stated TFLOP/s, or what a profile's block did", async () => {
    expect(sustainedFlopsPerMs(timesFromTflops(d, 4.3, 0.5), d, 0.5)).toBeCloseTo(4.3e9, -2);
    // a tensor-parallel rank's block does 1/TP of the FLOPs in 1/TP of the time: the same rate
    expect(sustainedFlopsPerMs(timesFromTflops({ ...d, tp: 2 }, 4.3), { ...d, tp: 2 })).toBeCloseTo(4.3e9, -2);
    const profiled = { ...timesFromTflops(d, 1), block: { forward: 30, backward: 60 } };
    expect(sustainedFlopsPerMs(profiled, d)).toBeCloseTo(blockForwardFlops(d) / 30, -2);
    // enqueued on the device's queue behind the layers; waiting for it does not count as a readback
    const { t, clock } = fakeClock();
    const dev = new EmulatedDevice({} as Runtime, { tflops: 4.3 }, timesFromTflops(d, 4.3), false, clock);
    dev.flopsPerMs = 4.3e9;
    clock.enqueue(10);
    expect(dev.enqueueFlops(4.3e10)).toBe(1020);
    await dev.reach(1020);
    expect([t.now, clock.reads, clock.takeBusyMs()]).toEqual([1020, 0, 20]);
    dev.flopsPerMs = 0;
    expect(() => dev.enqueueFlops(1)).toThrow(/no FLOP rate/);
  });

  it('an emulated shape times its own width and vocabulary, at the run batch', () => {
    const dims = emulatedDims({ d_model: 64, vocab_size: 27 }, EMULATED_SHAPES['gpt2-medium'], {
      B: 2,
      T: 64,
      tp: 1,
      checkpointing: false,
    });
    expect(dims).toEqual({ B: 2, T: 64, tp: 1, checkpointing: false, C: 1024, V: 50257 });
  });
});

describe('SHARDWISE_EMULATE', () => {
  it('unset or empty: no emulation (never a default)', () => {
    expect(parseEmulateEnv(undefined)).toBeUndefined();
    expect(parseEmulateEnv(' ')).toBeUndefined();
  });

  it('key=value pairs, a named shape, or the job field as JSON', () => {
    expect(parseEmulateEnv('tflops=4.3,overhead_ms=0.5')).toEqual({ tflops: 4.3, overhead_ms: 0.5 });
    expect(parseEmulateEnv('tflops=4.3,shape=gpt2-medium')).toEqual({ tflops: 4.3, shape: EMULATED_SHAPES['gpt2-medium'] });
    expect(parseEmulateEnv('profile=/tmp/h200.json')).toEqual({ profile: '/tmp/h200.json' });
    expect(parseEmulateEnv('{"tflops":2,"optimizer_ms":1}')).toEqual({ tflops: 2, optimizer_ms: 1 });
  });

  it('refusals say what to write', () => {
    expect(() => parseEmulateEnv('fast')).toThrow(/"fast" is not key=value; write e.g. tflops=4.3/);
    expect(() => parseEmulateEnv('tflops=4.3,shape=gpt5')).toThrow(/unknown shape "gpt5"; choose one of gpt2-medium/);
    expect(() => parseEmulateEnv('overhead_ms=1')).toThrow(/exactly one of tflops .* or profile/);
    expect(() => parseEmulateEnv('tflops=4.3,profile=/x')).toThrow(/exactly one of tflops/);
    expect(() => parseEmulateEnv('tflops=-1')).toThrow(/SHARDWISE_EMULATE: tflops/);
    expect(() => parseEmulateEnv('{tflops')).toThrow(/not valid JSON/);
  });
});

describe('the job field', () => {
  const resolve = (env: string | undefined, file?: Parameters<typeof resolveJob>[1]['file']) => {
    const saved = process.env.SHARDWISE_EMULATE;
    if (env === undefined) delete process.env.SHARDWISE_EMULATE;
    else process.env.SHARDWISE_EMULATE = env;
    try {
      return resolveJob({ strategy: 'ddp', world: 2 }, { runDir: '/tmp/run', ...(file ? { file } : {}) });
    } finally {
      if (saved === undefined) delete process.env.SHARDWISE_EMULATE;
      else process.env.SHARDWISE_EMULATE = saved;
    }
  };

  it('the resolver takes SHARDWISE_EMULATE (train, serve and agent-placed runs alike), or the config file, and nothing by default', () => {
    expect(resolve(undefined).emulate).toBeUndefined();
    expect(resolve('tflops=4.3').emulate).toEqual({ tflops: 4.3 });
    expect(resolve(undefined, { emulate: { tflops: 2 } }).emulate).toEqual({ tflops: 2 });
    expect(() => resolve('tflops=0')).toThrow(JobError);
  });
});
