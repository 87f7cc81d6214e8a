import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { emulatedLabel } from '../../common/emulated-label.js';
import { gptParamCount } from '../../common/model-params.js';
import { reportHtml } from '../../src-main/reports/html.js';
import { readRun } from '../../src-main/runs/read-run.js';
import { jsonLines, shardwise, tempDir } from '../cli/helpers.js';

// Emulated devices (workers/gpu/emulated-device.ts): two DDP ranks on SwiftShader, each layer
// pass timed at PASS_MS on the emulated device (a fixed launch cost at a TFLOP/s so high that
// the FLOPs add nothing), timing and bucket bytes of a 4x wider shape of the same depth. The
// real kernels still run: the losses are the plain run's, exactly.
const STEPS = 3;
const PASS_MS = 600;
// embedding, 2 blocks, head; forward and backward
const DEVICE_MS = 8 * PASS_MS;
// a step is the emulated compute plus its exposed communication and host work; on a loaded
// 2-core machine the real kernels of both ranks may finish late on a few reads
const TOLERANCE = 1.5;
const LONG = 300_000;
const root = tempDir('emulated');
const SHAPE = { name: 'tiny x4 wide', n_layer: 2, n_head: 2, d_model: 256, vocab_size: 27 };

interface Run {
  steps: { loss: number; step_ms: number }[];
  summary: Record<string, unknown>;
  dir: string;
}

function train(name: string, config?: object): Run {
  const dir = path.join(root, name);
  const extra: string[] = [];
  if (config) {
    writeFileSync(path.join(root, `${name}.json`), JSON.stringify(config));
    extra.push('--config', path.join(root, `${name}.json`));
  }
  const r = shardwise([
    'train',
    ...['--preset', 'tiny', '--strategy', 'ddp', '--world', '2', '--steps', String(STEPS), '--batch-size', '8', '--seed', '5'],
    ...['--eval-interval', '0', '--checkpoint-interval', '0', '--out', dir, '--json', ...extra],
  ]);
  expect(r.code, r.stderr).toBe(0);
  const lines = jsonLines(r.stdout);
  return { steps: lines.filter((m) => m.type === 'step') as unknown as Run['steps'], summary: lines.at(-1)!, dir };
}

describe(`emulated devices: ddp x 2 ranks, ${PASS_MS} ms per layer pass, ${SHAPE.name} shape`, () => {
  let plain: Run;
  let emulated: Run;
  beforeAll(() => {
    plain = train('plain');
    emulated = train('emulated', { emulate: { tflops: 1e6, overhead_ms: PASS_MS, shape: SHAPE } });
  }, LONG);

  it(`steps last the emulated device's ${DEVICE_MS} ms (at most x${TOLERANCE}), the losses stay the real ones`, () => {
    expect(emulated.steps.map((s) => s.loss)).toEqual(plain.steps.map((s) => s.loss));
    const ranks = (emulated.summary.emulated as { ranks: Record<string, { device_ms_per_step: number; real_bound_pct: number }> }).ranks;
    for (const r of ['0', '1']) expect(ranks[r]!.device_ms_per_step).toBeCloseTo(DEVICE_MS, 3);
    // the first step compiles every kernel: the rest are paced
    for (const s of emulated.steps.slice(1)) {
      const why = `step ${JSON.stringify(s)}; real-bound reads ${ranks['0']!.real_bound_pct}% / ${ranks['1']!.real_bound_pct}%`;
      expect(s.step_ms, why).toBeGreaterThanOrEqual(DEVICE_MS - 1);
      expect(s.step_ms, why).toBeLessThanOrEqual(TOLERANCE * DEVICE_MS);
    }
    // the compute spans the run recorded are the emulated device's
    const compute = readFileSync(path.join(emulated.dir, 'spans.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; start: number; end: number })
      .filter((x) => x.kind === 'forward' || x.kind === 'backward');
    expect(compute.length).toBe(2 * STEPS * 8);
    for (const x of compute) expect(x.end - x.start).toBeCloseTo(PASS_MS, 6);
  });

  it("the gradient buckets carry the emulated shape's bytes (zero padding), and every output says emulated", () => {
    const scale = gptParamCount({ ...SHAPE, block_size: 64 }, 27) / gptParamCount({ n_layer: 2, d_model: 64, block_size: 64 }, 27);
    const s = emulated.summary as {
      emulated: { spec: unknown; ranks: Record<string, { device: string; shape: string; grad_bytes_scale: number }> };
      bytes_moved_per_step: Record<string, number>;
    };
    const p = plain.summary as { bytes_moved_per_step: Record<string, number>; emulated?: unknown };
    expect(p.emulated).toBeUndefined();
    expect(s.emulated.spec).toEqual({ tflops: 1e6, overhead_ms: PASS_MS, shape: SHAPE });
    for (const r of ['0', '1']) {
      expect(s.emulated.ranks[r]).toMatchObject({ device: '1000000 TFLOP/s', shape: SHAPE.name });
      expect(s.emulated.ranks[r]!.grad_bytes_scale).toBeCloseTo(scale, 9);
      const ratio = s.bytes_moved_per_step[r]! / p.bytes_moved_per_step[r]!;
      expect(Math.abs(ratio / scale - 1), `bytes ratio ${ratio} vs shape scale ${scale}`).toBeLessThan(0.01);
    }
    const summaryFile = JSON.parse(readFileSync(path.join(emulated.dir, 'summary.json'), 'utf8')) as { emulated?: unknown };
    expect(summaryFile.emulated).toEqual(s.emulated);
    // the report (and the run view's badge, from the same label) name the emulated device; a plain run's do not
    const label = 'emulated device (1000000 TFLOP/s), timing the tiny x4 wide shape on a proxy model';
    expect(emulatedLabel(readRun(emulated.dir).config)).toBe(label);
    const html = reportHtml(readRun(emulated.dir));
    expect(html).toContain(`<strong class="emulated" id="glance-emulated">${label}</strong>`);
    expect(html).toContain(`<th>device</th><td>${label}</td>`);
    expect(reportHtml(readRun(plain.dir))).not.toContain('emulated device');
  });
});
