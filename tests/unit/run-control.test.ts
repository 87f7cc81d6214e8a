// The ranks' agreement at the end of each step (workers/run-control/): a stop one rank sees, or
// checkpoint minutes rank 0's clock counts, become the same decision on every rank, so all of
// them gather the same step's checkpoint and leave the loop together.
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src-main/cli/train-flags.js';
import { resolveJob } from '../../src-main/launch/resolve-job.js';
import { CheckpointCadence } from '../../workers/run-control/checkpoint-cadence.js';
import { StepAgreement } from '../../workers/run-control/step-agreement.js';

/** an in-memory world of `n` ranks whose allReduce takes the elementwise max once all posted */
function maxWorld(n: number) {
  let posted: { buf: Float32Array; done: () => void }[] = [];
  return Array.from({ length: n }, () => ({
    size: n,
    allReduce(buf: Float32Array) {
      const p = new Promise<Float32Array>((resolve) => posted.push({ buf, done: () => resolve(buf) }));
      if (posted.length === n) {
        const all = posted;
        posted = [];
        const max = all[0]!.buf.map((_, i) => Math.max(...all.map((a) => a.buf[i]!)));
        for (const a of all) a.buf.set(max);
        for (const a of all) a.done();
      }
      return { wait: () => p };
    },
  }));
}

/** every rank's decision after each of `steps` steps */
async function decisions(agreements: StepAgreement[], steps: number[]) {
  const out = [];
  for (const step of steps) out.push(await Promise.all(agreements.map((a) => a.agree(step))));
  return out;
}

describe('checkpoint cadence: every N steps or every T minutes, whichever first', () => {
  it('by steps: every 4th step and the last (10); 0 is off', () => {
    const c = new CheckpointCadence({ steps: 10, checkpoint_interval: 4, checkpoint_minutes: 0 });
    expect([...Array(10).keys()].map((i) => i + 1).filter((s) => c.stepDue(s))).toEqual([4, 8, 10]);
    expect(new CheckpointCadence({ steps: 10, checkpoint_interval: 0 }).stepDue(10)).toBe(false);
  });

  it('by time: due 10 minutes after the start by default, again 10 minutes after the last checkpoint; 0 minutes is off', () => {
    let now = 0;
    const c = new CheckpointCadence({ steps: 1000, checkpoint_interval: 500 }, () => now);
    now = 9.9 * 60_000;
    expect(c.timeDue()).toBe(false);
    now = 10 * 60_000;
    expect(c.timeDue()).toBe(true);
    c.written();
    now = 19 * 60_000;
    expect(c.timeDue()).toBe(false);
    now = 20 * 60_000;
    expect(c.timeDue()).toBe(true);
    const off = new CheckpointCadence({ steps: 1000, checkpoint_interval: 500, checkpoint_minutes: 0 }, () => now);
    now = 1e9;
    expect(off.timeDue()).toBe(false);
  });
});

describe('step agreement over the world', () => {
  it('a stop only rank 1 saw at step 3 stops and checkpoints both ranks at step 3', async () => {
    const [g0, g1] = maxWorld(2);
    let asked = false;
    const spec = { steps: 300, checkpoint_interval: 150, checkpoint_minutes: 0 };
    const a = [new StepAgreement(spec, g0!, 0, () => false), new StepAgreement(spec, g1!, 1, () => asked)];
    const [s1, s2] = await decisions(a, [1, 2]);
    expect([s1, s2]).toEqual([
      [
        { checkpoint: false, stop: false },
        { checkpoint: false, stop: false },
      ],
      [
        { checkpoint: false, stop: false },
        { checkpoint: false, stop: false },
      ],
    ]);
    asked = true;
    const [s3] = await decisions(a, [3]);
    expect(s3).toEqual([
      { checkpoint: true, stop: true },
      { checkpoint: true, stop: true },
    ]);
    expect(a.map((x) => x.stoppedAt)).toEqual([3, 3]);
  });

  it("rank 0's clock decides the minutes: its 10 minutes checkpoint both ranks at once; rank 1's clock is not asked", async () => {
    const [g0, g1] = maxWorld(2);
    let t0 = 0;
    const spec = { steps: 300, checkpoint_interval: 150, checkpoint_minutes: 10 };
    const a = [
      new StepAgreement(
        spec,
        g0!,
        0,
        () => false,
        () => t0,
      ),
      new StepAgreement(
        spec,
        g1!,
        1,
        () => false,
        () => 1e12,
      ), // far ahead: ignored
    ];
    expect((await decisions(a, [1]))[0]!.map((d) => d.checkpoint)).toEqual([false, false]);
    t0 = 10 * 60_000;
    expect((await decisions(a, [2]))[0]!.map((d) => d.checkpoint)).toEqual([true, true]);
    // the period starts again from that checkpoint
    t0 = 15 * 60_000;
    expect((await decisions(a, [3]))[0]!.map((d) => d.checkpoint)).toEqual([false, false]);
  });

  it('a stop at the last step lets the run complete; one rank alone needs no collective', async () => {
    const spec = { steps: 5, checkpoint_interval: 0, checkpoint_minutes: 0 };
    const alone = new StepAgreement(spec, null, 0, () => true);
    expect(await alone.agree(4)).toEqual({ checkpoint: true, stop: true });
    const last = new StepAgreement(spec, null, 0, () => true);
    expect(await last.agree(5)).toEqual({ checkpoint: false, stop: false });
    expect(last.stoppedAt).toBeNull();
  });
});

describe('train.checkpoint_minutes: the job field, its flag and its default', () => {
  const resolve = (argv: string[], train?: Record<string, number>) =>
    resolveJob(parseTrainArgs(argv).request, { runDir: '/tmp/run', ...(train ? { file: { train }, configName: 'c.json' } : {}) }).train;

  it('defaults to 10 minutes beside the step interval (half the steps); the file sets it, the flag beats the file; 0 is off', () => {
    expect(resolve(['--steps', '300'])).toMatchObject({ checkpoint_interval: 150, checkpoint_minutes: 10 });
    expect(resolve([], { checkpoint_minutes: 0 }).checkpoint_minutes).toBe(0);
    expect(resolve(['--checkpoint-minutes', '2.5'], { checkpoint_minutes: 0 }).checkpoint_minutes).toBe(2.5);
  });

  it('refuses what is not a number of minutes, naming the flag', () => {
    expect(() => parseTrainArgs(['--checkpoint-minutes', 'soon'])).toThrow(
      '--checkpoint-minutes must be 0 (off) or a positive number of minutes, got "soon"',
    );
    expect(() => parseTrainArgs(['--checkpoint-minutes', '-1'])).toThrow(
      '--checkpoint-minutes must be 0 (off) or a positive number of minutes, got "-1"',
    );
  });
});
