// npm run bench:engine — the adapter, matmul GFLOP/s at 256/512/1024, and training tokens/s
// of the tiny and small presets (sizes stated in the output). Prints one JSON object.
import { BatchSampler, loadDataset } from '../workers/data/index.js';
import { openDevice } from '../workers/gpu/device.js';
import { Runtime } from '../workers/gpu/runtime.js';
import { paramCount } from '../workers/model/config.js';
import { Gpt } from '../workers/model/gpt.js';
import { AdamW, DEFAULT_ADAMW } from '../workers/optim/adamw.js';
import { PRESETS } from '../workers/protocol/presets.js';
import { benchMatmul } from './engine-matmul.js';

/** vocab: the built-in dataset's, or a fixed size with random tokens (the tfjs reference model had 65) */
async function trainThroughput(rt: Runtime, preset: string, steps: number, vocab?: number) {
  const p = PRESETS[preset]!;
  const data = loadDataset('builtin:grammar', p.block_size);
  const V = vocab ?? data.tokenizer.vocabSize;
  const tokens = vocab ? Uint32Array.from(data.train, (t, i) => (t * 31 + i) % vocab) : data.train;
  const cfg = { n_layer: p.n_layer, n_head: p.n_head, d_model: p.d_model, block_size: p.block_size, vocab_size: V };
  const B = p.batch_size;
  const T = p.block_size;
  const model = new Gpt(rt, cfg, { B, T });
  const opt = new AdamW(rt, model.params, { ...DEFAULT_ADAMW, lr: p.lr });
  model.params.initialize(1);
  const sampler = new BatchSampler(tokens, { batchSize: B, blockSize: T, seed: 1 });
  const dispatchesBefore = rt.dispatchCount;
  const step = async (i: number) => {
    const b = sampler.batchAt(i);
    model.setBatch(b.inputs, b.targets);
    model.zeroGrad();
    await model.forward('train');
    await model.backward();
    opt.recordGradNorm();
    opt.recordStep(p.lr);
    return model.readLoss();
  };
  await step(0); // compile and warm up
  const perStep = rt.dispatchCount - dispatchesBefore;
  const t0 = performance.now();
  for (let i = 1; i <= steps; i++) await step(i);
  const ms = (performance.now() - t0) / steps;
  return {
    preset: vocab ? `${preset} (vocab ${vocab}, the tfjs reference size)` : preset,
    n_layer: cfg.n_layer,
    n_head: cfg.n_head,
    d_model: cfg.d_model,
    block_size: T,
    batch_size: B,
    vocab_size: cfg.vocab_size,
    params: paramCount(cfg),
    step_ms: ms,
    tokens_per_s: (B * T * 1000) / ms,
    dispatches_per_step: perStep,
  };
}

const opened = await openDevice(process.env.SHARDWISE_DEVICE);
const rt = new Runtime(opened);
const { index: _index, limits: _limits, ...adapter } = opened.report;
void _index;
void _limits;
const matmul = await benchMatmul(rt, [256, 512, 1024]);
const train = [await trainThroughput(rt, 'tiny', 20), await trainThroughput(rt, 'tiny', 20, 65), await trainThroughput(rt, 'small', 5)];
process.stdout.write(`${JSON.stringify({ adapter, matmul, train }, null, 2)}\n`);
rt.destroy();
process.exit(0);
