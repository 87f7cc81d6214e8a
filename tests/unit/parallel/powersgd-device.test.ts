// PowerSGD with its math on the device (what DDP runs): two in-process ranks on one real WebGPU
// runtime, each with its own gradient buffer, against the same hook over host copies of the same
// gradients. The device's sums are float32 where the host's accumulate in float64, so they agree
// to float32 rounding, not bit for bit; a resumed device hook continues bit for bit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HookBucket, POWERSGD_DEFAULTS, PowerSgdHook } from '../../../workers/comm-hooks/index.js';
import type { GpuTensor } from '../../../workers/gpu/allocator.js';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { simulatedGroups } from './simulated-groups.js';

// a bucket as DDP lays it out: each parameter on a 64-element slot; a 24 x 16 weight, a 16-element
// bias, a 40 x 32 weight (compressed at rank 4 except the bias)
const BUCKET: HookBucket = {
  index: 0,
  tensors: [
    { name: 'w1', shape: [24, 16], start: 0, numel: 384 },
    { name: 'b1', shape: [16], start: 384, numel: 16 },
    { name: 'w2', shape: [40, 32], start: 448, numel: 1280 },
  ],
  labels: { bucket: 0 },
};
const N = 448 + 1280;
const W = 2;

/** rank r's gradients at step s, zero in the padding (as the device's gradient arena) */
function grads(r: number, s: number): Float32Array {
  const g = new Float32Array(N);
  for (const t of BUCKET.tensors)
    for (let i = t.start; i < t.start + t.numel; i++)
      g[i] = Math.sin(0.37 * i + 1.3 * r + 0.71 * s) * 0.01 + Math.cos(0.011 * i * (r + 1)) * 0.003;
  return g;
}

const options = { ...POWERSGD_DEFAULTS, rank: 4, seed: 7, startIter: 1 };

describe('PowerSGD on the device (DDP hands it the gradient view)', () => {
  let rt: Runtime;
  let x: GpuTensor[];
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
    x = [0, 1].map((r) => rt.allocator.tensor(`grads.${r}`, 'grads', [N]));
  });
  afterAll(() => rt?.destroy());

  /** one step of W device hooks over x, and of W host hooks over host copies; returns both results */
  async function step(dev: PowerSgdHook[], host: PowerSgdHook[] | null, s: number) {
    const pgD = simulatedGroups(W);
    const pgH = simulatedGroups(W);
    const data = [0, 1].map((r) => grads(r, s));
    data.forEach((d, r) => rt.write(x[r]!, d));
    const hostData = data.map((d) => d.slice());
    await Promise.all([
      ...dev.map((h, r) => h.runOnDevice(pgD[r]!, BUCKET, x[r]!)),
      ...(host ?? []).map((h, r) => h.run(pgH[r]!, BUCKET, hostData[r]!)),
    ]);
    for (const h of [...dev, ...(host ?? [])]) h.endStep();
    return { dev: await Promise.all(x.map((t) => rt.read(t))), host: hostData };
  }

  const close = (a: Float32Array, b: Float32Array, what: string) => {
    let err = 0,
      norm = 0;
    for (let i = 0; i < a.length; i++) {
      err = Math.max(err, Math.abs(a[i]! - b[i]!));
      norm = Math.max(norm, Math.abs(b[i]!));
    }
    expect(err, `${what}: largest difference against a largest value of ${norm}`).toBeLessThanOrEqual(2e-5 * norm);
  };

  it('the uncompressed first step is the exact sum; then results and error memories match the host math to float32 rounding; the bytes are the same', async () => {
    const dev = [0, 1].map(() => new PowerSgdHook(options, null, { rt, world: W }));
    const host = [0, 1].map(() => new PowerSgdHook(options));
    expect(dev[0]!.onDevice).toBe(true);
    const first = await step(dev, host, 0);
    expect([...first.dev[0]!]).toEqual([...first.host[0]!]);
    for (let s = 1; s < 4; s++) {
      const r = await step(dev, host, s);
      for (const k of [0, 1]) close(r.dev[k]!, r.host[k]!, `step ${s}, rank ${k}'s result`);
      expect([...r.dev[1]!]).toEqual([...r.dev[0]!]);
      // the padding between parameters stays zero
      for (let i = 400; i < 448; i++) expect(r.dev[0]![i]).toBe(0);
    }
    const [sd, sh] = [await dev[1]!.state(), await host[1]!.state()];
    expect([...sd.tensors.keys()].sort()).toEqual(['error.0', 'q.0']);
    close(sd.tensors.get('error.0')!, sh.tensors.get('error.0')!, "rank 1's error memory");
    const [rd, rh] = [await dev[0]!.report(), await host[0]!.report()];
    expect(rd.compressed_bytes).toBe(rh.compressed_bytes);
    expect(rd.uncompressed_bytes).toBe(rh.uncompressed_bytes);
    expect(rd.error_feedback_norm! / rh.error_feedback_norm!).toBeCloseTo(1, 4);
    // the host side refuses a hook made for the device, and the other way round
    expect(() => dev[0]!.run(simulatedGroups(W)[0]!, BUCKET, new Float32Array(N))).toThrow(/runOnDevice/);
    expect(() => host[0]!.runOnDevice(simulatedGroups(W)[0]!, BUCKET, x[0]!)).toThrow(/without a device/);
  });

  it('its state restored into fresh device hooks (error memory written back up) continues bit for bit; without it the result differs', async () => {
    const a = [0, 1].map(() => new PowerSgdHook(options, null, { rt, world: W }));
    for (let s = 0; s < 3; s++) await step(a, null, s);
    const saved = await Promise.all(a.map((h) => h.state()));
    const b = [0, 1].map(() => new PowerSgdHook(options, null, { rt, world: W }));
    b.forEach((h, r) => h.loadState(saved[r]!));
    const outA = (await step(a, null, 3)).dev;
    const outB = (await step(b, null, 3)).dev;
    expect([...outB[0]!]).toEqual([...outA[0]!]);
    const [ea, eb] = [await a[1]!.state(), await b[1]!.state()];
    expect([...eb.tensors.get('error.0')!]).toEqual([...ea.tensors.get('error.0')!]);
    const c = [0, 1].map(() => new PowerSgdHook(options, null, { rt, world: W }));
    c.forEach((h) => (h.iter = 3));
    const outC = (await step(c, null, 3)).dev;
    expect([...outC[0]!]).not.toEqual([...outA[0]!]);
  });
  it('without error feedback: the results match the host math, and no error memory is kept or checkpointed (norm 0)', async () => {
    const o = { ...options, errorFeedback: false };
    const dev = [0, 1].map(() => new PowerSgdHook(o, null, { rt, world: W }));
    const host = [0, 1].map(() => new PowerSgdHook(o));
    for (let s = 0; s < 3; s++) {
      const r = await step(dev, host, s);
      for (const k of [0, 1]) close(r.dev[k]!, r.host[k]!, `step ${s}, rank ${k}'s result`);
    }
    expect([...(await dev[0]!.state()).tensors.keys()]).toEqual(['q.0']);
    expect((await dev[0]!.report()).error_feedback_norm).toBe(0);
    expect((await host[0]!.report()).error_feedback_norm).toBe(0);
  });
});
