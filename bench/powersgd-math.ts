// npm run bench:powersgd [-- --model small|gpt2|gpt2-medium --rank R --rounds N]
// What PowerSGD's own math costs one rank per step, on this machine's adapter, with no network:
// a one-rank group (its all-reduces return at once), the model's DDP-sized buckets (25 MiB of
// fp32 gradients each, every matrix compressed at rank R as the hook's plan does), two ways:
//   host:   what DDP did before the math moved to the device: read the bucket back, the hook's
//           float64-accumulated math in JS, write the bucket back;
//   device: the hook on the bucket's gradient view (powersgd-device.ts), reading back only P, Q
//           and the uncompressed tensors, then a sync so its last kernels are counted.
// Prints one JSON object: {"adapter", "model", "rank", "params", "host_ms", "device_ms", "speedup"}
// (medians over the rounds after a first, compiling one). On a real GPU the device figure is the
// one that matters; on a software adapter both run on the CPU.
import { parseArgs } from 'node:util';
import type { ProcessGroup } from '../workers/comm/index.js';
import { type HookBucket, POWERSGD_DEFAULTS, PowerSgdHook } from '../workers/comm-hooks/index.js';
import { SLICE_ALIGN } from '../workers/gpu/allocator.js';
import { openDevice } from '../workers/gpu/device.js';
import { Runtime } from '../workers/gpu/runtime.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string', default: 'small' },
    rank: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '5' },
  },
  strict: true,
});
/** a layer's matrices and vectors (GPT-2: qkv, proj, fc, fc proj; two layernorms and the biases) */
const layer = (C: number): number[][] => [[3 * C, C], [C, C], [4 * C, C], [C, 4 * C], [3 * C], [C], [4 * C], [C], [C], [C], [C], [C]];
const MODELS: Record<string, { layers: number; C: number }> = {
  small: { layers: 4, C: 128 },
  gpt2: { layers: 12, C: 768 },
  'gpt2-medium': { layers: 24, C: 1024 },
};
const model = MODELS[v.model!];
if (!model) throw new Error(`--model must be one of ${Object.keys(MODELS).join(', ')}, got "${v.model}"`);
const rank = Number(v.rank);
const rounds = Number(v.rounds);
if (!Number.isInteger(rank) || rank < 1) throw new Error(`--rank must be a positive integer, got "${v.rank}"`);
if (!Number.isInteger(rounds) || rounds < 2) throw new Error(`--rounds must be an integer >= 2, got "${v.rounds}"`);

// DDP's buckets: parameters in order, each on a slot, closed at 25 MiB
const SLOT = SLICE_ALIGN / 4;
const CAP = (25 * 2 ** 20) / 4;
const buckets: HookBucket[] = [];
let cur: HookBucket['tensors'][number][] = [];
let at = 0;
const close = () => {
  if (cur.length) buckets.push({ index: buckets.length, tensors: cur, labels: { bucket: buckets.length } });
  cur = [];
  at = 0;
};
for (let l = 0; l < model.layers; l++)
  for (const shape of layer(model.C)) {
    const numel = shape.reduce((a, x) => a * x, 1);
    if (at + numel > CAP && cur.length) close();
    cur.push({ name: `h${l}.${cur.length}`, shape, start: at, numel });
    at += Math.ceil(numel / SLOT) * SLOT;
  }
close();
const sizeOf = (b: HookBucket) => {
  const t = b.tensors.at(-1)!;
  return t.start + Math.ceil(t.numel / SLOT) * SLOT;
};
const params = buckets.reduce((a, b) => a + b.tensors.reduce((x, t) => x + t.numel, 0), 0);

const pg = {
  size: 1,
  rank: 0,
  allReduce: (buf: Float32Array) => ({ wait: async () => buf }),
} as unknown as ProcessGroup;

const opened = await openDevice();
const rt = new Runtime(opened);
const grads = buckets.map((b) => rt.allocator.tensor(`grads.${b.index}`, 'grads', [sizeOf(b)]));
const hostCopies = buckets.map((b) => new Float32Array(sizeOf(b)));
for (const [i, g] of grads.entries()) {
  const x = hostCopies[i]!;
  for (let k = 0; k < x.length; k++) x[k] = Math.sin(0.37 * k + i) * 0.01;
  rt.write(g, x);
}
const o = { ...POWERSGD_DEFAULTS, rank, seed: 1, startIter: 0 };
const host = new PowerSgdHook(o);
const device = new PowerSgdHook(o, null, { rt, world: 1 });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function time(f: () => Promise<void>): Promise<number[]> {
  const ms: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    await f();
    ms.push(performance.now() - t0);
  }
  return ms.slice(1);
}
const hostMs = await time(async () => {
  for (const [i, b] of buckets.entries()) {
    const x = await rt.read(grads[i]!, grads[i]!.numel, 0, hostCopies[i]);
    await host.run(pg, b, x);
    rt.write(grads[i]!, x);
  }
  await rt.sync();
  host.endStep();
});
const deviceMs = await time(async () => {
  for (const [i, b] of buckets.entries()) await device.runOnDevice(pg, b, grads[i]!);
  await rt.sync();
  device.endStep();
});
const [h, d] = [median(hostMs), median(deviceMs)];
console.log(
  JSON.stringify({
    adapter: opened.report.description,
    model: v.model,
    rank,
    params,
    buckets: buckets.length,
    host_ms: Math.round(h * 10) / 10,
    device_ms: Math.round(d * 10) / 10,
    speedup: Math.round((h / d) * 100) / 100,
  }),
);
rt.destroy();
