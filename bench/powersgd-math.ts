// npm run bench:powersgd [-- --model small|gpt2|gpt2-medium --rank R --rounds N]
// What PowerSGD's own math costs one rank per step, on this machine's adapter, with no network:
// a one-rank group (its all-reduces return at once) and the model's DDP buckets as a run lays
// them out (common/advisor/ddp-comm.ts ddpBuckets, at the job's default caps: a 0.0625 MiB first
// bucket, then 0.25 MiB), every matrix compressed at rank R as the hook's plan does, two ways:
//   host:   DDP's path on a software adapter: read the bucket back, the hook's
//           float64-accumulated math in JS, write the bucket back;
//   device: the hook on the bucket's gradient view (powersgd-device.ts), reading back only P, Q
//           and the uncompressed tensors, then a sync so its last kernels are counted.
// Prints one JSON object: {"adapter", "model", "rank", "params", "buckets", "host_ms", "device_ms",
// "speedup"} (medians over the rounds after a first, compiling one). On a real GPU the device
// figure is the one that matters; on a software adapter both run on the CPU.
import { parseArgs } from 'node:util';
import { ddpBuckets } from '../common/advisor/ddp-comm.js';
import { slotElems } from '../common/padding.js';
import type { ProcessGroup } from '../workers/comm/index.js';
import { type HookBucket, POWERSGD_DEFAULTS, PowerSgdHook } from '../workers/comm-hooks/index.js';
import { openDevice } from '../workers/gpu/device.js';
import { Runtime } from '../workers/gpu/runtime.js';
import { DEFAULT_PARALLEL } from '../workers/protocol/train.js';
import { median } from '../common/stats.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string', default: 'small' },
    rank: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '5' },
  },
  strict: true,
});
/** small at the built-in dataset's 27 characters; GPT-2's shapes at its 50257 tokens */
const MODELS = {
  small: { n_layer: 4, d_model: 128, block_size: 128, vocab_size: 27 },
  gpt2: { n_layer: 12, d_model: 768, block_size: 1024, vocab_size: 50257 },
  'gpt2-medium': { n_layer: 24, d_model: 1024, block_size: 1024, vocab_size: 50257 },
};
const model = MODELS[v.model as keyof typeof MODELS];
if (!model) throw new Error(`--model must be one of ${Object.keys(MODELS).join(', ')}, got "${v.model}"`);
const rank = Number(v.rank);
const rounds = Number(v.rounds);
if (!Number.isInteger(rank) || rank < 1) throw new Error(`--rank must be a positive integer, got "${v.rank}"`);
if (!Number.isInteger(rounds) || rounds < 2) throw new Error(`--rounds must be an integer >= 2, got "${v.rounds}"`);

// the buckets as the hook gets them: each tensor on its slot, 1-D ones (cols 1) as vectors
const buckets: HookBucket[] = ddpBuckets(model, DEFAULT_PARALLEL, 4).map((b) => {
  let at = 0;
  const tensors = b.tensors.map((t) => {
    const numel = t.rows * t.cols;
    const out = { name: t.name, shape: t.cols === 1 ? [t.rows] : [t.rows, t.cols], start: at, numel };
    at += slotElems(numel);
    return out;
  });
  return { index: b.index, tensors, labels: { bucket: b.index } };
});
const sizeOf = (b: HookBucket) => {
  const t = b.tensors.at(-1)!;
  return t.start + slotElems(t.numel);
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
