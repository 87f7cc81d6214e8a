// The typed API's boundary checks (common/api): a bad request fails with a message naming the
// method and the field; the controller's telemetry queue stays bounded for a slow subscriber.
import { describe, expect, it } from 'vitest';
import { ApiError, fieldError, fieldMessage, type LaunchConfig, parseEvent, parseParams, parseResult } from '../../common/api/index.js';
import { JobError, resolveJob } from '../../src-main/launch/resolve-job.js';
import { parseTrainArgs } from '../../src-main/cli/train-flags.js';
import { RunTelemetry } from '../../src-main/controller/telemetry.js';

const fails = (method: string, params: unknown): string => {
  try {
    parseParams(method, params);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).name).toBe('ValidationError');
    return (e as Error).message;
  }
  throw new Error(`${method} ${JSON.stringify(params)} was accepted`);
};

describe('typed API request validation', () => {
  it('names the field and what is wrong', () => {
    expect(fails('runs.launch', { config: { world: '2' } })).toMatch(/^runs\.launch params: config\.world: .*expected number/);
    expect(fails('runs.launch', { config: { steps: 0 } })).toMatch(/config\.steps: .*>=\s*1/);
    expect(fails('runs.launch', { config: { model: { n_layer: 2.5 } } })).toMatch(/config\.model\.n_layer: .*int/);
    expect(fails('runs.launch', { config: { offload_optimizer: 'gpu' } })).toMatch(
      /config\.offload_optimizer: .*"none"\|"cpu"|config\.offload_optimizer: .*none.*cpu/,
    );
    expect(fails('runs.launch', {})).toMatch(/runs\.launch params: config: /);
  });

  it('an error about one field carries it, so a form highlights the field without reading the message', () => {
    const e = (() => {
      try {
        parseParams('runs.plan', { config: { model: { n_layer: 2.5 } } });
      } catch (err) {
        return err as ApiError;
      }
    })();
    expect(e?.field).toBe('config.model.n_layer');
    expect(e?.toJSON()).toMatchObject({ name: 'ValidationError', field: 'config.model.n_layer' });
    const f = fieldError(
      'ValidationError',
      'runs.plan params',
      'config.micro_batches',
      'batch size 8 is not divisible by world 2 x micro-batches 3',
    );
    expect(f.message).toBe('runs.plan params: config.micro_batches: batch size 8 is not divisible by world 2 x micro-batches 3');
    expect(fieldMessage(f)).toBe('batch size 8 is not divisible by world 2 x micro-batches 3');
    expect(fieldMessage({ message: 'no field here' })).toBe('no field here');
  });

  it('refuses unknown fields and methods, saying what to do', () => {
    expect(fails('runs.launch', { config: { wrold: 2 } })).toBe('runs.launch params: config: unknown field "wrold"; remove it');
    expect(fails('runs.nuke', {})).toMatch(/unknown method "runs\.nuke"; the methods are devices\.list, .*runs\.launch/);
  });

  it('a run id is a folder name: no path escapes', () => {
    for (const runId of ['../etc', 'a/b', '', '.hidden', 'x'.repeat(121)])
      expect(fails('runs.get', { runId })).toMatch(/runs\.get params: runId: /);
    expect(parseParams('runs.get', { runId: '20261129-192202-tiny-ddp-0e20e7' }).params).toEqual({
      runId: '20261129-192202-tiny-ddp-0e20e7',
    });
  });

  it('results and events are checked on receipt', () => {
    expect(() => parseResult('runs.stop', { ok: 'yes' })).toThrow(/runs\.stop result: ok: /);
    expect(() => parseEvent({ type: 'step', row: { type: 'step', step: 1 } })).toThrow(/run event: row\.loss: /);
    expect(parseEvent({ type: 'log', level: 'info', time: 1, message: 'hi' })).toEqual({
      type: 'log',
      level: 'info',
      time: 1,
      message: 'hi',
    });
  });

  it('a launch config resolves like the same CLI flags; resolver errors name API fields', () => {
    const resolve = (c: LaunchConfig) => resolveJob(c, { runDir: '/tmp/x/run' });
    const job = resolve({ strategy: 'ddp', world: 2, steps: 3, lr: 1e-3, prefetch: undefined, model: { n_layer: 1 } });
    expect(job.parallel).toMatchObject({ strategy: 'ddp', world: 2 });
    expect(job.train).toMatchObject({ steps: 3, lr: 1e-3, min_lr: 1e-4 });
    expect(job.model).toMatchObject({ preset: 'tiny', n_layer: 1, d_model: 64 });
    expect(job.run_dir).toBe('/tmp/x/run');
    // model parallelism, the stage split and the span switch resolve as their flags and config sections do
    const pp = resolve({ strategy: 'pp', pp: 2, schedule: 'gpipe', partition: 'time', micro_batches: 2, model: { n_layer: 2 } });
    expect(pp.parallel).toMatchObject({ strategy: 'pp', world: 2, schedule: 'gpipe', partition: 'time', micro_batches: 2 });
    const flags = parseTrainArgs(['--strategy', 'pp', '--pp', '2', '--schedule', 'gpipe', '--partition', 'time', '--micro-batches', '2']);
    expect(resolveJob(flags.request, { runDir: '/tmp/x/run' })).toEqual(pp);
    expect(resolve({ strategy: '3d', dp: 2, tp: 2, pp: 2, model: { n_layer: 2, n_head: 2 } }).parallel).toMatchObject({
      strategy: '3d',
      world: 8,
    });
    expect(resolve({ strategy: 'ddp', spans: false }).telemetry).toEqual({ spans: false });
    const refused = (() => {
      try {
        resolve({ strategy: 'pp', spans: false });
      } catch (e) {
        return e as JobError;
      }
    })();
    expect(refused).toBeInstanceOf(JobError);
    expect(refused).toMatchObject({
      field: 'spans',
      message: 'spans false does not apply to strategy pp: the pipeline bubble is measured from its spans',
    });
  });
});

describe('telemetry backpressure', () => {
  const state = () => ({ status: 'running' as const, created_at: '', updated_at: '', step: 0, steps: 10 });
  const step = (n: number) => ({
    type: 'step' as const,
    row: { type: 'step' as const, step: n, loss: 1, lr: 1, grad_norm: 1, tokens_per_s: 1, step_ms: 1, memory: {} },
  });

  it('a subscriber that never reads holds at most its queue bound, then one snapshot with the dropped count', () => {
    const hub = new RunTelemetry(state, [], 8);
    const slow = hub.subscribe();
    const fast = hub.subscribe();
    const got: number[] = [];
    for (let i = 1; i <= 1000; i++) {
      hub.publish(step(i));
      for (let e = fast.take(); e; e = fast.take()) if (e.type === 'step') got.push(e.row.step);
      expect(slow.pending).toBeLessThanOrEqual(8);
    }
    expect(got).toHaveLength(1000);
    const first = slow.take()!;
    expect(first.type).toBe('snapshot');
    if (first.type !== 'snapshot') return;
    expect(first.snapshot.dropped).toBeGreaterThan(900);
    // the snapshot carries the latest steps (bounded), so the view can redraw without a refetch
    expect(first.snapshot.recent_steps.at(-1)?.step).toBeGreaterThan(990);
    expect(first.snapshot.recent_steps.length).toBeLessThanOrEqual(200);
    slow.close();
    hub.publish(step(1001));
    expect(slow.take()).toBeUndefined();
    expect(hub.subscribers).toBe(1);
  });
});
