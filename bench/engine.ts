// npm run bench:engine — the adapter, matmul GFLOP/s at 256/512/1024, and training tokens/s
// of the tiny and small presets (sizes stated in the output), each in fp32 and in bf16 and fp16
// mixed precision (16-bit weights, activations and gradients, fp32 master weights and moments),
// with the peak bytes by category (one device: no bytes move). A step is the training loop's:
// forward, backward, update, then the gradient norm and the loss read back; fp16 runs DeepSpeed's
// dynamic loss scaling from its default 2^16 on that norm's overflow verdict, as `shardwise train`
// does, and its rows report the final scale and the skipped steps. Prints one JSON object.
// On a real GPU, widen it: SHARDWISE_BENCH_MATMUL=1024,2048,4096 and
// SHARDWISE_BENCH_TRAIN=tiny,tiny65,small,gpt2 (gpt2: GPT-2 124M's shape, vocab 50257, B=4, T=1024);
// SHARDWISE_BENCH_PRECISION=fp32,bf16,fp16 picks the precisions.
import { BatchSampler, loadDataset } from '../workers/data/index.js';
import { type OpenedDevice, openDevice } from '../workers/gpu/device.js';
import { STORAGE_PRECISIONS, type StoragePrecision } from '../workers/gpu/precision.js';
import { Runtime } from '../workers/gpu/runtime.js';
import { Gpt } from '../workers/model/gpt.js';
import { initialFullParams, shardModel, vocabAlign } from '../workers/model/tp-layout.js';
import { AdamW, DEFAULT_ADAMW } from '../workers/optim/adamw.js';
import { StepScaling } from '../workers/precision/step-scaling.js';
import { PRESETS } from '../workers/protocol/presets.js';
import { benchMatmul } from './engine-matmul.js';
import { singleStep } from './single-step.js';

/** vocab: the built-in dataset's, or a fixed size with random tokens (the tfjs reference model had 65) */
const GPT2_124M = { n_layer: 12, n_head: 12, d_model: 768, block_size: 1024, batch_size: 4, lr: 6e-4 };

async function trainThroughput(
  opened: OpenedDevice,
  preset: string,
  steps: number,
  vocab: number | undefined,
  precision: StoragePrecision,
) {
  // a runtime of its own: its allocator counts this row's tensors only
  const rt = new Runtime(opened);
  const p = preset === 'gpt2' ? GPT2_124M : PRESETS[preset]!;
  const data = loadDataset('builtin:grammar', p.block_size);
  const V = vocab ?? data.tokenizer.vocabSize;
  const tokens = vocab ? Uint32Array.from(data.train, (t, i) => (t * 31 + i) % vocab) : data.train;
  const cfg = { n_layer: p.n_layer, n_head: p.n_head, d_model: p.d_model, block_size: p.block_size, vocab_size: V };
  const B = p.batch_size;
  const T = p.block_size;
  const model = new Gpt(rt, cfg, { B, T, precision });
  const opt = new AdamW(rt, model.params, { ...DEFAULT_ADAMW, lr: p.lr });
  if (precision === 'fp32') model.params.writeParams(initialFullParams(cfg, 1));
  else opt.writeMaster(shardModel(cfg, initialFullParams(cfg, 1), 1, 0, vocabAlign(precision)));
  const sampler = new BatchSampler(tokens, { batchSize: B, blockSize: T, seed: 1 });
  const dispatchesBefore = rt.dispatchCount;
  // the trainer's step scaling: fp16's dynamic loss scale (DeepSpeed's defaults), none at fp32 and bf16
  const scaling = new StepScaling({ precision });
  const step = async (i: number) => {
    const scale = scaling.scale;
    const loss = await singleStep(model, opt, sampler, i, p.lr, scale);
    // inf/NaN: the scaled gradients overflowed and the kernel skipped the update; the scaling sets the next scale
    scaling.settle(await opt.readGradNorm(scale), scale);
    return loss;
  };
  await step(0); // compile and warm up
  const perStep = rt.dispatchCount - dispatchesBefore;
  const t0 = performance.now();
  for (let i = 1; i <= steps; i++) await step(i);
  const ms = (performance.now() - t0) / steps;
  const loss = await step(steps + 1);
  const stats = rt.allocator.stats().byCategory;
  return {
    preset:
      preset === 'gpt2' ? 'gpt2 (GPT-2 124M shape, random tokens)' : vocab ? `${preset} (vocab ${vocab}, the tfjs reference size)` : preset,
    n_layer: cfg.n_layer,
    n_head: cfg.n_head,
    d_model: cfg.d_model,
    block_size: T,
    batch_size: B,
    vocab_size: cfg.vocab_size,
    precision,
    // the device's tensors (a 16-bit run's wte is padded to a multiple of 4 rows)
    params: model.params.count,
    step_ms: ms,
    tokens_per_s: (B * T * 1000) / ms,
    dispatches_per_step: perStep,
    last_loss: loss,
    peak_bytes: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.peakAllocated])),
    ...scaling.summary(),
  };
}

const opened = await openDevice(process.env.SHARDWISE_DEVICE);
const rt = new Runtime(opened);
const { index: _index, limits: _limits, ...adapter } = opened.report;
void _index;
void _limits;
const sizes = (process.env.SHARDWISE_BENCH_MATMUL ?? '256,512,1024').split(',').map(Number);
const matmul = await benchMatmul(rt, sizes);
const runs: Record<string, (p: StoragePrecision) => ReturnType<typeof trainThroughput>> = {
  tiny: (p) => trainThroughput(opened, 'tiny', 20, undefined, p),
  tiny65: (p) => trainThroughput(opened, 'tiny', 20, 65, p),
  small: (p) => trainThroughput(opened, 'small', 5, undefined, p),
  gpt2: (p) => trainThroughput(opened, 'gpt2', 3, 50257, p),
};
const precisions = (process.env.SHARDWISE_BENCH_PRECISION ?? STORAGE_PRECISIONS.join(',')).split(',') as StoragePrecision[];
for (const p of precisions)
  if (!STORAGE_PRECISIONS.includes(p))
    throw new Error(`SHARDWISE_BENCH_PRECISION: unknown precision "${p}"; choose from ${STORAGE_PRECISIONS.join(', ')}`);
const train = [];
for (const name of (process.env.SHARDWISE_BENCH_TRAIN ?? 'tiny,tiny65,small').split(',')) {
  const run = runs[name];
  if (!run) throw new Error(`SHARDWISE_BENCH_TRAIN: unknown run "${name}"; choose from ${Object.keys(runs).join(', ')}`);
  for (const p of precisions) train.push(await run(p));
}
process.stdout.write(`${JSON.stringify({ adapter, matmul, train }, null, 2)}\n`);
rt.destroy();
process.exit(0);
