// Single-device training loop of one rank: the whole step (forward, backward, gradient norm,
// AdamW) is recorded and submitted at once; the only readbacks are the loss and grad norm.
import { type Dataset, loadDataset, BatchSampler, STREAM_TRAIN, STREAM_VAL, CharTokenizer } from '../data/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { type GptConfig, validateGptConfig } from '../model/config.js';
import { Gpt } from '../model/gpt.js';
import { AdamW } from '../optim/adamw.js';
import type { RankMessage, TrainJob } from '../protocol/train.js';
import { loadTrainingCheckpoint, saveTrainingCheckpoint } from './checkpointing.js';
import { currentBytes, peakBytes } from './memory.js';
import { learningRate } from './schedule.js';

export type Emit = (m: RankMessage) => void;

export async function runTraining(job: TrainJob, emit: Emit): Promise<void> {
  const t = job.train;
  const resumed = job.resume_from ? await loadTrainingCheckpoint(job.resume_from) : null;
  if (resumed) {
    const c = resumed.manifest.config;
    const m = job.model;
    if (c.n_layer !== m.n_layer || c.n_head !== m.n_head || c.d_model !== m.d_model || c.block_size !== m.block_size) {
      throw new Error(`checkpoint ${job.resume_from} holds a different model (${JSON.stringify(c)}) than the run's config`);
    }
  }
  const T = t.seq_len ?? job.model.block_size;
  if (T > job.model.block_size) throw new Error(`train.seq_len ${T} is larger than model.block_size ${job.model.block_size}`);
  const tokenizer = resumed ? CharTokenizer.fromJSON(resumed.manifest.tokenizer) : undefined;
  const data: Dataset = loadDataset(job.data.dataset, T, tokenizer);
  const config: GptConfig = validateGptConfig({
    n_layer: job.model.n_layer,
    n_head: job.model.n_head,
    d_model: job.model.d_model,
    block_size: job.model.block_size,
    vocab_size: data.tokenizer.vocabSize,
  });

  const opened = await openDevice(job.device.adapter);
  const rt = new Runtime(opened);
  const B = t.batch_size;
  const model = new Gpt(rt, config, { B, T, checkpointing: t.activation_checkpointing, lossScale: 1 / (B * T) });
  const opt = new AdamW(rt, model.params, { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weight_decay, maxGradNorm: t.grad_clip });
  let startStep = 0;
  if (resumed) {
    model.params.writeParams(resumed.params);
    opt.writeState({ m: resumed.m, v: resumed.v }, resumed.manifest.optimizer_step);
    startStep = resumed.manifest.step;
  } else {
    model.params.initialize(t.seed);
  }
  await rt.sync();

  const train = new BatchSampler(data.train, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_TRAIN });
  const val = new BatchSampler(data.val, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_VAL });
  emit({
    type: 'ready',
    adapter: { ...opened.report },
    vocab_size: config.vocab_size,
    params: model.params.count,
    start_step: startStep,
    memory: currentBytes(rt.allocator),
  });

  const evaluate = async (): Promise<number> => {
    let total = 0;
    for (let i = 0; i < t.eval_batches; i++) {
      const b = val.batchAt(i);
      model.setBatch(b.inputs, b.targets);
      await model.forward('eval');
      const losses = await model.readLosses();
      let s = 0;
      for (const x of losses) s += x;
      total += s / losses.length;
    }
    return total / t.eval_batches;
  };

  let lastLoss = NaN;
  for (let step = startStep + 1; step <= t.steps; step++) {
    const t0 = performance.now();
    const batch = train.batchAt(step - 1);
    model.setBatch(batch.inputs, batch.targets);
    model.zeroGrad();
    await model.forward('train');
    await model.backward();
    opt.recordGradNorm();
    const lr = learningRate(step, { lr: t.lr, min_lr: t.min_lr, warmup_steps: t.warmup_steps, steps: t.steps });
    opt.recordStep(lr);
    const loss = await model.readLoss();
    const gradNorm = await opt.readGradNorm();
    const stepMs = performance.now() - t0;
    if (!Number.isFinite(loss)) throw new Error(`loss became ${loss} at step ${step}; lower the learning rate (train.lr = ${t.lr})`);
    lastLoss = loss;
    emit({
      type: 'step',
      step,
      loss,
      lr,
      grad_norm: gradNorm,
      tokens: B * T,
      step_ms: stepMs,
      tokens_per_s: (B * T * 1000) / stepMs,
      memory: currentBytes(rt.allocator),
    });
    if (t.eval_interval > 0 && (step % t.eval_interval === 0 || step === t.steps)) {
      emit({ type: 'eval', step, val_loss: await evaluate() });
    }
    if (t.checkpoint_interval > 0 && (step % t.checkpoint_interval === 0 || step === t.steps)) {
      const params = await model.params.readParams();
      const state = await opt.readState();
      const path = await saveTrainingCheckpoint(job, {
        step,
        config,
        tokenizer: data.tokenizer.toJSON(),
        params,
        m: state.m,
        v: state.v,
        optimizerStep: opt.step,
      }, new Map(model.params.refs.map((r) => [r.name, [...r.shape]])));
      emit({ type: 'checkpoint', step, path });
    }
  }
  emit({ type: 'done', steps: t.steps, final_loss: lastLoss, peak_bytes: peakBytes(rt.allocator), params: model.params.count });
  rt.destroy();
}
