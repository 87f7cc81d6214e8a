// The training loop of one pipeline stage (--strategy pp, world = pp stages). Per optimizer
// step: zero the stage's gradients; run the schedule's action list over the m micro-batches of
// the global batch (every stage walks the same micro-batches: the first reads their tokens, the
// last their targets); sum the tied wte gradient over the embedding group; the global gradient
// norm over the stages; AdamW on the stage's parameters. Each micro-batch's loss is scaled by
// 1/(tokens of the global batch), so the last stage's sum is the single-device loss.
import { BatchSampler, CharTokenizer, type Dataset, loadDataset, STREAM_TRAIN, STREAM_VAL } from '../data/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { type GptConfig, paramCount, validateGptConfig } from '../model/config.js';
import { joinWorld } from '../parallel/bootstrap.js';
import { PipelineStage } from '../parallel/pipeline.js';
import { profileLayerTimes, sharePartition, type TimedPartition } from '../parallel/pipeline-profile.js';
import { partitionByTime, stageMs } from '../parallel/pipeline-schedule.js';
import { COMM_ENV } from '../protocol/comm.js';
import type { TrainJob } from '../protocol/train.js';
import { DEFAULT_PARALLEL } from '../protocol/train.js';
import { loadTrainingCheckpoint } from './checkpointing.js';
import { finishRun, saveWholeModel, stageSpansMessage } from './pipeline-steps.js';
import { currentBytes, peakBytes } from './memory.js';
import { learningRate } from './schedule.js';
import type { Emit } from './trainer.js';
import { StepTraffic, trafficFields } from './step-traffic.js';

/** Validation of a pipeline job; each message names the field and what to do. */
export function validatePipelineJob(job: TrainJob) {
  const par = job.parallel ?? DEFAULT_PARALLEL;
  const pp = par.pp ?? par.world;
  if (pp < 2) throw new Error(`parallel.pp must be at least 2 for strategy pp, got ${pp}`);
  if (par.world !== pp) throw new Error(`parallel.world (${par.world}) must equal parallel.pp (${pp}): every rank is one pipeline stage`);
  if (job.model.n_layer < pp)
    throw new Error(
      `model.n_layer ${job.model.n_layer} is smaller than parallel.pp ${pp}: every stage needs at least one block; lower --pp or use more layers`,
    );
  if (job.train.batch_size % par.micro_batches !== 0) {
    throw new Error(
      `train.batch_size ${job.train.batch_size} is not divisible by parallel.micro_batches ${par.micro_batches}; every micro-batch needs whole rows`,
    );
  }
}

export async function runPipelineTraining(job: TrainJob, emit: Emit): Promise<void> {
  validatePipelineJob(job);
  const t = job.train;
  const par = job.parallel!;
  const m = par.micro_batches;
  const resumed = job.resume_from ? await loadTrainingCheckpoint(job.resume_from) : null;
  const T = t.seq_len ?? job.model.block_size;
  if (T > job.model.block_size) throw new Error(`train.seq_len ${T} is larger than model.block_size ${job.model.block_size}`);
  const B = t.batch_size;
  const tokenizer = resumed ? CharTokenizer.fromJSON(resumed.manifest.tokenizer) : undefined;
  const data: Dataset = loadDataset(job.data.dataset, T, tokenizer);
  const config: GptConfig = validateGptConfig({
    n_layer: job.model.n_layer,
    n_head: job.model.n_head,
    d_model: job.model.d_model,
    block_size: job.model.block_size,
    vocab_size: data.tokenizer.vocabSize,
  });
  // --partition time: rank 0 measures every layer at the micro-batch size before it joins (the
  // other ranks start once it has), and every stage takes its split from the store
  let measured: TimedPartition | null = null;
  if (par.partition === 'time' && Number(process.env[COMM_ENV.rank] ?? 0) === 0) {
    const times = await profileLayerTimes(config, {
      adapter: job.device.adapter,
      B: B / m,
      T,
      checkpointing: t.activation_checkpointing,
      seed: t.seed,
    });
    measured = { times, ranges: partitionByTime(times, par.world) };
  }
  const world = await joinWorld((port) => emit({ type: 'store', port }));
  const rank = world.rank;
  try {
    const timed = par.partition === 'time' ? await sharePartition(world.pg, measured) : null;
    const opened = await openDevice(job.device.adapter);
    const rt = new Runtime(opened);
    const adamw = { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weight_decay, maxGradNorm: t.grad_clip };
    const stage = new PipelineStage(
      rt,
      config,
      world.pg,
      {
        schedule: par.schedule ?? '1f1b',
        m,
        B: B / m,
        T,
        lossScale: 1 / (B * T),
        checkpointing: t.activation_checkpointing,
        stageDelayMs: par.stage_delay_ms ?? 0,
        partition: timed?.ranges,
      },
      adamw,
    );
    let startStep = 0;
    if (resumed) {
      stage.load(resumed.params, { m: resumed.m, v: resumed.v, step: resumed.manifest.optimizer_step });
      startStep = resumed.manifest.step;
    } else stage.params.initialize(t.seed);
    await rt.sync();
    await stage.setup(world.pg);

    const train = new BatchSampler(data.train, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_TRAIN });
    const val = new BatchSampler(data.val, { batchSize: B / m, blockSize: T, seed: t.seed, stream: STREAM_VAL });
    await emit({
      type: 'ready',
      rank,
      adapter: { ...opened.report },
      vocab_size: config.vocab_size,
      params: paramCount(config),
      start_step: startStep,
      memory: currentBytes(rt.allocator),
    });

    const sentBy = (spans: { op: string; bytes: number }[], f: (op: string) => boolean) =>
      spans.filter((s) => f(s.op)).reduce((a, s) => a + s.bytes, 0);
    const traffic = new StepTraffic(() => world.pg.peerBytes());
    let p2pBytes = 0;
    let embBytes = 0;
    let lastLoss = NaN;
    for (let step = startStep + 1; step <= t.steps; step++) {
      const t0 = performance.now();
      traffic.begin();
      world.pg.telemetry.takeSpans(true); // this step's spans only
      stage.zeroGrad();
      const spans = await stage.runStep((k) => train.microBatchAt(step - 1, 0, 1, k, m));
      const lr = learningRate(step, { lr: t.lr, min_lr: t.min_lr, warmup_steps: t.warmup_steps, steps: t.steps });
      const gradNorm = await stage.optimizerStep(lr);
      const loss = await stage.readLoss();
      const stepMs = performance.now() - t0;
      traffic.end();
      if (!Number.isFinite(loss)) throw new Error(`loss became ${loss} at step ${step}; lower the learning rate (train.lr = ${t.lr})`);
      lastLoss = loss;
      const comm = world.pg.telemetry.takeSpans(true);
      // payload bytes this rank sent: boundary activations/gradients, and its part of the tied-wte all-reduce
      p2pBytes += sentBy(comm, (op) => op.startsWith('send['));
      embBytes += comm.filter((s) => s.group === 'embedding' && s.op.startsWith('allReduce')).reduce((a, s) => a + s.bytes, 0);
      await emit(stageSpansMessage(rank, step, stage, spans, comm));
      await emit({
        type: 'step',
        rank,
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
        let total = 0;
        for (let i = 0; i < t.eval_batches; i++) total += (await stage.evalBatch(val.batchAt(i))) ?? 0;
        if (stage.range.last) await emit({ type: 'eval', step, val_loss: total / t.eval_batches });
      }
      if (t.checkpoint_interval > 0 && (step % t.checkpoint_interval === 0 || step === t.steps)) {
        await saveWholeModel(stage, job, step, config, data.tokenizer.toJSON(), emit);
      }
    }
    const steps = t.steps - startStep;
    const per = (x: number) => (steps > 0 ? x / steps : 0);
    await emit({
      type: 'done',
      rank,
      steps: t.steps,
      final_loss: lastLoss,
      peak_bytes: peakBytes(rt.allocator),
      params: paramCount(config),
      ...trafficFields(traffic.perStep(steps)),
      p2p_bytes_per_step: per(p2pBytes),
      embedding_allreduce_bytes_per_step: per(embBytes),
      stage: {
        index: stage.stage,
        from: stage.range.from,
        to: stage.range.to,
        slots: stage.slots.length,
        params: stage.params.count,
        ...(timed ? { partition: 'time' as const, profiled_ms: stageMs(timed.times, stage.range) } : { partition: 'params' as const }),
      },
    });
    await finishRun(world.pg, rt);
  } finally {
    world.pg.destroy();
    await world.store?.close();
  }
}
