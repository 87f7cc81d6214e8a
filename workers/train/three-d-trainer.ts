// The training loop of one rank of a 3D run (--strategy 3d: D x T x P ranks, protocol/grid.ts).
// The rank is TP shard `tp` of pipeline stage `pp` of data-parallel replica `dp`. Per optimizer
// step: zero the gradients; the pipeline schedule over the m micro-batches of this replica's
// rows (TP collectives inside every forward/backward, boundary send/recv along the PP group);
// then PipelineStage.optimizerStep: the tied wte sum over the embedding group; ZeRO-1 across the
// DP group (reduce-scatter the gradients, AdamW moments for 1/D of the shard's flat layout,
// all-gather the weights); the global gradient norm (TP shards once each, replicated parameters
// once, stages summed, never the DP replicas). Losses are scaled by 1/(tokens of the global
// batch), so the last stages' TP-rank-0 losses summed over the replicas are the single-device loss.
import { BatchSampler, CharTokenizer, type Dataset, loadDataset, STREAM_TRAIN, STREAM_VAL } from '../data/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { type GptConfig, paramCount, validateGptConfig } from '../model/config.js';
import { initialFullParams } from '../model/tp-layout.js';
import type { ProcessGroup } from '../comm/index.js';
import { joinWorld } from '../parallel/bootstrap.js';
import { coordsOf, dpGroups, embeddingGroups, type Grid, ppGroups, tpGroups, validateThreeDJob } from '../protocol/grid.js';
import { PipelineStage } from '../parallel/pipeline.js';
import type { TrainJob } from '../protocol/train.js';
import { COMM_ENV } from '../protocol/comm.js';
import { loadTrainingCheckpoint } from './checkpointing.js';
import { finishRun, saveWholeModel, stageSpansMessage } from './pipeline-steps.js';
import { currentBytes, peakBytes } from './memory.js';
import { learningRate } from './schedule.js';
import type { Emit } from './trainer.js';
import { StepTraffic, trafficFields } from './step-traffic.js';

/** Every rank creates every group, in the same order (newGroup's contract); returns its own. */
async function buildGroups(world: Awaited<ReturnType<typeof joinWorld>>, g: Grid) {
  const mine = async (all: number[][], name: string) => {
    let own: ProcessGroup | null = null;
    for (const ranks of all) own = (await world.pg.newGroup(ranks, { name })) ?? own;
    return own!;
  };
  const tp = await mine(tpGroups(g), 'tp');
  const dp = await mine(dpGroups(g), 'dp');
  const pp = await mine(ppGroups(g), 'pp');
  return { tp, dp, pp };
}

export async function runThreeDTraining(job: TrainJob, emit: Emit): Promise<void> {
  const grid = validateThreeDJob(job);
  const t = job.train;
  const par = job.parallel!;
  const m = par.micro_batches;
  const resumed = job.resume_from ? await loadTrainingCheckpoint(job.resume_from) : null;
  const T = t.seq_len ?? job.model.block_size;
  if (T > job.model.block_size) throw new Error(`train.seq_len ${T} is larger than model.block_size ${job.model.block_size}`);
  const B = t.batch_size;
  const rowsPerReplica = B / grid.dp;
  const tokenizer = resumed ? CharTokenizer.fromJSON(resumed.manifest.tokenizer) : undefined;
  const data: Dataset = loadDataset(job.data.dataset, T, tokenizer);
  const config: GptConfig = validateGptConfig({
    n_layer: job.model.n_layer,
    n_head: job.model.n_head,
    d_model: job.model.d_model,
    block_size: job.model.block_size,
    vocab_size: data.tokenizer.vocabSize,
  });
  const rank = Number(process.env[COMM_ENV.rank] ?? 0);
  const me = coordsOf(grid, rank);
  // build the stage (and compile its kernels) before joining: a rank blocked in compilation for
  // seconds cannot answer its peers' heartbeats
  const opened = await openDevice(job.device.adapter);
  const rt = new Runtime(opened);
  const adamw = { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weight_decay, maxGradNorm: t.grad_clip };
  const stage = new PipelineStage(
    rt,
    config,
    { rank: me.pp, size: grid.pp },
    {
      schedule: par.schedule ?? '1f1b',
      m,
      B: rowsPerReplica / m,
      T,
      lossScale: 1 / (B * T),
      checkpointing: t.activation_checkpointing,
      stageDelayMs: par.stage_delay_ms ?? 0,
    },
    adamw,
    {
      group: { rank: me.tp, size: grid.tp },
      partitionActivations: par.partition_activations ?? true,
      dataParallel: { rank: me.dp, size: grid.dp },
    },
  );
  const world = await joinWorld((port) => emit({ type: 'store', port }));
  if (world.rank !== rank || world.size !== par.world)
    throw new Error(`rank ${world.rank} of ${world.size} joined a 3d run laid out for rank ${rank} of ${par.world}`);
  try {
    const groups = await buildGroups(world, grid);
    stage.attach(groups.pp, groups.tp, groups.dp);
    let startStep = 0;
    if (resumed) {
      stage.load(resumed.params, { m: resumed.m, v: resumed.v, step: resumed.manifest.optimizer_step });
      startStep = resumed.manifest.step;
    } else stage.load(initialFullParams(config, t.seed), null); // every rank shards the single-device initial weights
    await rt.sync();
    await stage.setup(world.pg, embeddingGroups(grid));

    const train = new BatchSampler(data.train, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_TRAIN });
    const val = new BatchSampler(data.val, { batchSize: rowsPerReplica / m, blockSize: T, seed: t.seed, stream: STREAM_VAL });
    await emit({
      type: 'ready',
      rank,
      adapter: { ...opened.report },
      vocab_size: config.vocab_size,
      params: paramCount(config),
      start_step: startStep,
      memory: currentBytes(rt.allocator),
    });

    const traffic = new StepTraffic(() => world.pg.peerBytes());
    let lastLoss = NaN;
    // the rank that reports the loss of its replica's rows: last stage, TP rank 0
    const reportsLoss = stage.range.last && me.tp === 0;
    for (let step = startStep + 1; step <= t.steps; step++) {
      const t0 = performance.now();
      traffic.begin();
      world.pg.telemetry.takeSpans(true);
      stage.zeroGrad();
      const spans = await stage.runStep((k) => train.microBatchAt(step - 1, me.dp, grid.dp, k, m));
      const lr = learningRate(step, { lr: t.lr, min_lr: t.min_lr, warmup_steps: t.warmup_steps, steps: t.steps });
      const gradNorm = await stage.optimizerStep(lr);
      const loss = await stage.readLoss();
      const stepMs = performance.now() - t0;
      traffic.end();
      if (!Number.isFinite(loss)) throw new Error(`loss became ${loss} at step ${step}; lower the learning rate (train.lr = ${t.lr})`);
      lastLoss = loss;
      const comm = world.pg.telemetry.takeSpans(true);
      await emit(stageSpansMessage(rank, step, stage, spans, comm));
      await emit({
        type: 'step',
        rank,
        step,
        // the controller sums the ranks' losses: one rank per replica reports its share
        loss: reportsLoss ? loss : 0,
        lr,
        grad_norm: gradNorm,
        tokens: B * T,
        step_ms: stepMs,
        tokens_per_s: (B * T * 1000) / stepMs,
        memory: currentBytes(rt.allocator),
      });
      if (t.eval_interval > 0 && (step % t.eval_interval === 0 || step === t.steps)) {
        // every replica runs the same validation batches (its TP collectives need the whole group)
        let total = 0;
        for (let i = 0; i < t.eval_batches; i++) total += (await stage.evalBatch(val.batchAt(i))) ?? 0;
        if (reportsLoss && me.dp === 0) await emit({ type: 'eval', step, val_loss: total / t.eval_batches });
      }
      if (t.checkpoint_interval > 0 && (step % t.checkpoint_interval === 0 || step === t.steps)) {
        await saveWholeModel(stage, job, step, config, data.tokenizer.toJSON(), emit);
      }
    }
    const steps = t.steps - startStep;
    await emit({
      type: 'done',
      rank,
      steps: t.steps,
      final_loss: lastLoss,
      peak_bytes: peakBytes(rt.allocator),
      params: paramCount(config),
      ...trafficFields(traffic.perStep(steps)),
      stage: { index: stage.stage, from: stage.range.from, to: stage.range.to, slots: stage.slots.length, params: stage.params.count },
    });
    await finishRun(world.pg, rt);
  } finally {
    world.pg.destroy();
    await world.store?.close();
  }
}
