// The training loop of one rank. Per optimizer step: zero the gradients; for each micro-batch
// of this rank's rows of the global batch, record forward and backward (the strategy syncs
// gradients on the last one); then the strategy finishes communication and updates. Every
// micro-batch's loss is scaled by 1/(tokens of the global batch), so the ranks' losses sum to
// the global mean and their gradients to the single-device gradient.
import { BatchSampler, CharTokenizer, type Dataset, loadDataset, STREAM_TRAIN, STREAM_VAL } from '../data/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { type GptConfig, validateGptConfig } from '../model/config.js';
import { Gpt } from '../model/gpt.js';
import { AdamW } from '../optim/adamw.js';
import { DEFAULT_PARALLEL, type RankMessage, type TrainJob } from '../protocol/train.js';
import { joinWorld, type World } from '../parallel/bootstrap.js';
import { Ddp } from '../parallel/ddp.js';
import { ParameterServerDp } from '../parallel/dp.js';
import { Zero1 } from '../parallel/zero1.js';
import { Zero2 } from '../parallel/zero2.js';
import { Zero3 } from '../parallel/zero3.js';
import { ParamStore } from '../model/params.js';
import { GpuTimeline } from '../parallel/gpu-timeline.js';
import { overlapPercent } from '../parallel/overlap.js';
import { SingleDevice, type Strategy } from '../parallel/strategy.js';
import { GroupTpOps, TensorParallel } from '../parallel/tensor-parallel.js';
import { initialFullParams } from '../model/tp-layout.js';
import { paramSpecs } from '../model/config.js';
import { loadTrainingCheckpoint, saveTrainingCheckpoint } from './checkpointing.js';
import { currentBytes, peakBytes } from './memory.js';
import { learningRate } from './schedule.js';
import { runPipelineTraining } from './pipeline-trainer.js';
import { runThreeDTraining } from './three-d-trainer.js';
import { StepTraffic, trafficFields } from './step-traffic.js';

export type Emit = (m: RankMessage) => void | Promise<void>;

export async function runTraining(job: TrainJob, emit: Emit): Promise<void> {
  const t = job.train;
  const par = job.parallel ?? DEFAULT_PARALLEL;
  if (par.strategy === 'pp') return runPipelineTraining(job, emit); // its own loop: pipeline-trainer.ts
  if (par.strategy === '3d') return runThreeDTraining(job, emit); // three-d-trainer.ts
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
  const B = t.batch_size;
  // data-parallel ranks: tensor-parallel ranks all see the same rows
  const isTp = par.strategy === 'tp';
  if (isTp && (par.tp ?? par.world) !== par.world)
    throw new Error(
      `parallel.tp (${par.tp}) must equal parallel.world (${par.world}) for strategy tp: every rank is one shard of the model`,
    );
  const N = isTp ? 1 : par.world;
  if (B % (N * par.micro_batches) !== 0) {
    throw new Error(
      `train.batch_size ${B} must be divisible by world (${N}) x micro_batches (${par.micro_batches}) so every rank and micro-batch gets whole rows`,
    );
  }
  if (par.offload_optimizer === 'cpu' && par.strategy !== 'zero1' && par.strategy !== 'zero2') {
    throw new Error(
      `parallel.offload_optimizer "cpu" needs strategy zero1 or zero2 (ZeRO-Offload moves the sharded optimizer to the host), not ${par.strategy}`,
    );
  }
  if (par.strategy === 'single' && N !== 1) throw new Error(`strategy single runs one rank, not ${N}; pick dp or ddp for --world ${N}`);
  const tokenizer = resumed ? CharTokenizer.fromJSON(resumed.manifest.tokenizer) : undefined;
  const data: Dataset = loadDataset(job.data.dataset, T, tokenizer);
  const config: GptConfig = validateGptConfig({
    n_layer: job.model.n_layer,
    n_head: job.model.n_head,
    d_model: job.model.d_model,
    block_size: job.model.block_size,
    vocab_size: data.tokenizer.vocabSize,
  });

  const world: World | null = par.strategy !== 'single' ? await joinWorld((port) => emit({ type: 'store', port })) : null;
  const rank = world?.rank ?? 0;
  try {
    const opened = await openDevice(job.device.adapter);
    const rt = new Runtime(opened);
    const rowsPerMicro = B / N / par.micro_batches;
    // ZeRO-2 keeps gradients in constant-size bucket buffers instead of a full arena
    // ZeRO-3 also partitions the weights, gathered per layer into working buffers
    const params =
      par.strategy === 'zero2' || par.strategy === 'zero3'
        ? new ParamStore(rt, config, Math.max(par.bucket_cap_mb * 2 ** 20, 1), par.strategy === 'zero3')
        : undefined;
    // tensor parallel: one group of every rank (TP ranks adjacent, Megatron's order)
    const tpGroup = isTp
      ? await world!.pg.newGroup(
          Array.from({ length: par.world }, (_, i) => i),
          { name: 'tp' },
        )
      : null;
    const model = new Gpt(rt, config, {
      B: rowsPerMicro,
      T,
      checkpointing: t.activation_checkpointing,
      lossScale: 1 / (B * T),
      params,
      tp: tpGroup ? { ops: new GroupTpOps(rt, tpGroup), partitionActivations: par.partition_activations ?? true } : undefined,
    });
    const adamwConfig = { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weight_decay, maxGradNorm: t.grad_clip };
    // DP keeps the optimizer on rank 0 only; ZeRO shards it (the strategy owns it)
    const needsOptimizer = (par.strategy !== 'dp' || rank === 0) && !['zero1', 'zero2', 'zero3'].includes(par.strategy);
    const opt = needsOptimizer ? new AdamW(rt, model.params, adamwConfig) : null;

    // per-layer compute spans (and the comm spans beside them) unless the job turned them off
    const timeline = world && job.telemetry?.spans !== false ? new GpuTimeline(rt) : null;
    if (timeline) {
      let micro = 0;
      model.hooks.afterForward = (l) => timeline.mark('forward', l.name, micro);
      model.hooks.afterBackward = (l) => {
        timeline.mark('backward', l.name, micro);
        if (l.index === 0) micro++;
      };
    }
    let strategy: Strategy;
    const ctx = { rt, model, opt, pg: world?.pg as NonNullable<World['pg']> };
    if (tpGroup) {
      strategy = new TensorParallel({ rt, model, opt: opt!, tp: tpGroup });
    } else if (par.strategy === 'ddp') {
      strategy = new Ddp(
        { ...ctx, opt: opt! },
        { bucketCapBytes: par.bucket_cap_mb * 2 ** 20, firstBucketBytes: par.first_bucket_mb * 2 ** 20 },
      );
    } else if (par.strategy === 'dp') {
      strategy = new ParameterServerDp(ctx);
    } else if (par.strategy === 'zero3') {
      strategy = new Zero3(ctx, adamwConfig, par.prefetch ?? true);
    } else if (par.strategy === 'zero2') {
      strategy = new Zero2(ctx, adamwConfig, undefined, par.offload_optimizer === 'cpu');
    } else if (par.strategy === 'zero1') {
      strategy = new Zero1(ctx, adamwConfig, par.offload_optimizer === 'cpu');
    } else {
      strategy = new SingleDevice({ rt, model, opt: opt! });
    }
    let startStep = 0;
    if (strategy instanceof TensorParallel) {
      strategy.loadFullParams(resumed?.params ?? initialFullParams(config, t.seed));
      if (resumed) strategy.loadOptimizerState({ m: resumed.m, v: resumed.v, step: resumed.manifest.optimizer_step });
      startStep = resumed?.manifest.step ?? 0;
    } else if (resumed) {
      model.params.writeParams(resumed.params);
      strategy.loadOptimizerState({ m: resumed.m, v: resumed.v, step: resumed.manifest.optimizer_step });
      startStep = resumed.manifest.step;
    } else {
      model.params.initialize(t.seed);
    }
    await rt.sync();
    if (world) await strategy.setup();

    const train = new BatchSampler(data.train, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_TRAIN });
    const val = new BatchSampler(data.val, { batchSize: rowsPerMicro, blockSize: T, seed: t.seed, stream: STREAM_VAL });
    await emit({
      type: 'ready',
      rank,
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

    const traffic = new StepTraffic(() => world?.pg.peerBytes() ?? []);
    const overlaps: number[] = [];
    let lastLoss = NaN;
    for (let step = startStep + 1; step <= t.steps; step++) {
      const t0 = performance.now();
      traffic.begin();
      model.zeroGrad();
      world?.pg.telemetry.takeSpans(true); // this step's spans only
      for (let k = 0; k < par.micro_batches; k++) {
        const batch = train.microBatchAt(step - 1, isTp ? 0 : rank, N, k, par.micro_batches);
        model.setBatch(batch.inputs, batch.targets);
        await model.forward('train');
        strategy.beforeBackward(k === par.micro_batches - 1);
        await model.backward();
      }
      await strategy.finishGradients();
      const lr = learningRate(step, { lr: t.lr, min_lr: t.min_lr, warmup_steps: t.warmup_steps, steps: t.steps });
      const gradNorm = await strategy.optimizerStep(lr);
      traffic.end(); // the step's own traffic (not checkpoint gathers)
      const loss = await model.readLoss();
      const stepMs = performance.now() - t0;
      if (!Number.isFinite(loss)) throw new Error(`loss became ${loss} at step ${step}; lower the learning rate (train.lr = ${t.lr})`);
      lastLoss = loss;
      if (timeline && world) {
        const compute = await timeline.drain();
        const allComm = world.pg.telemetry.takeSpans(true);
        const gradComm = allComm.filter((s) => s.labels?.bucket !== undefined);
        const o = overlapPercent(
          compute.filter((s) => s.kind === 'backward'),
          gradComm,
        );
        if (o !== null) overlaps.push(o);
        await emit({
          type: 'spans',
          rank,
          step,
          spans: [
            ...compute.map((s) => ({ kind: s.kind, name: s.layer, start: s.start, end: s.end, micro: s.micro })),
            ...allComm.map((s) => ({
              kind: 'comm' as const,
              name: s.op,
              start: s.start,
              end: s.end,
              bytes: s.bytes,
              ...(s.labels ? { labels: s.labels } : {}),
            })),
          ],
        });
      }
      await emit({
        type: 'step',
        rank,
        step,
        // the rank's share of the global mean loss: tensor-parallel ranks all hold the whole loss, rank 0 reports it
        loss: isTp && rank !== 0 ? 0 : loss,
        lr,
        grad_norm: gradNorm,
        tokens: B * T,
        step_ms: stepMs,
        tokens_per_s: (B * T * 1000) / stepMs,
        memory: { ...currentBytes(rt.allocator), ...(strategy as Strategy).hostBytes?.() },
      });
      if (t.eval_interval > 0 && (step % t.eval_interval === 0 || step === t.steps)) {
        // ZeRO-3's forward gathers weights from every rank, so every rank evaluates
        if (rank === 0) await emit({ type: 'eval', step, val_loss: await evaluate() });
        else if (strategy instanceof Zero3 || strategy instanceof TensorParallel) await evaluate();
      }
      if (t.checkpoint_interval > 0 && (step % t.checkpoint_interval === 0 || step === t.steps)) {
        const state = await strategy.optimizerState(); // collective where the state is sharded
        const gathered = strategy instanceof Zero3 || strategy instanceof TensorParallel ? await strategy.fullParams() : null; // collective
        if (rank === 0 && state) {
          const params = gathered ?? (await model.params.readParams());
          const path = await saveTrainingCheckpoint(
            job,
            { step, config, tokenizer: data.tokenizer.toJSON(), params, m: state.m, v: state.v, optimizerStep: state.step },
            new Map(paramSpecs(config).map((r) => [r.name, [...r.shape]])),
          );
          await emit({ type: 'checkpoint', step, path });
        }
      }
    }
    const steps = t.steps - startStep;
    await emit({
      type: 'done',
      rank,
      steps: t.steps,
      final_loss: lastLoss,
      peak_bytes: { ...peakBytes(rt.allocator), ...(strategy as Strategy).hostBytes?.() },
      params: model.params.count,
      ...(world
        ? {
            ...trafficFields(traffic.perStep(steps)),
            ...(overlaps.length ? { overlap_pct: overlaps.reduce((a, b) => a + b, 0) / overlaps.length } : {}),
            ...(strategy instanceof Ddp ? { buckets: strategy.buckets.length } : {}),
          }
        : {}),
    });
    if (world) await world.pg.barrier().wait();
    // every rank passed the barrier above before anyone closes its links: a fast rank's close
    // must not reach a peer still finishing the barrier's last round (it would abort that peer)
    if (world) await world.pg.store.barrier('end-of-run', world.size, 60_000).catch(() => {});
    rt.destroy();
  } finally {
    world?.pg.destroy();
    await world?.store?.close();
  }
}
