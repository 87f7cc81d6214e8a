// The training loop of one rank, for every strategy. Per optimizer step: zero the gradients;
// forward and backward of this rank's micro-batches of the global batch (the engine synchronises
// the gradients); the optimizer step at the scheduled learning rate; the loss. Every micro-batch's
// loss is scaled by 1/(tokens of the global batch), so the ranks' reported shares sum to the
// global mean and the gradients to the single-device gradient. What differs between strategies
// lives in the engine (engine.ts): data-parallel-engine.ts or pipeline-engine.ts.
// fp16's loss scale around each step: precision/step-scaling.ts.
import { rankStepFlops } from '../../common/advisor/flops.js';
import { TABLE } from '../../common/strategies.js';
import { checkpointAtLoadDir } from '../checkpoint/at-load.js';
import { loadTrainingCheckpoint, type ResumedState, saveTrainingCheckpoint } from '../checkpoint/training-state.js';
import { joinWorld, type World } from '../comm/index.js';
import { hookRecord, resumedHookStates } from '../comm-hooks/index.js';
import { BatchSampler, CharTokenizer, loadDataset, STREAM_TRAIN, STREAM_VAL } from '../data/index.js';
import { stateSave } from '../elastic/state-save.js';
import { loadHfInit } from '../export/hf-import.js';
import { validateGptConfig } from '../model/config.js';
import { initialFullParams } from '../model/tp-layout.js';
import { StepScaling } from '../precision/step-scaling.js';
import { throwIfDiverged } from '../protocol/divergence.js';
import { DEFAULT_PARALLEL, type TrainJob } from '../protocol/train.js';
import { StepAgreement } from '../run-control/step-agreement.js';
import { currentBytes, peakBytes } from '../telemetry/memory-figures.js';
import { StepTraffic, trafficFields } from '../telemetry/step-traffic.js';
import { startDataParallel } from './data-parallel-engine.js';
import type { Emit } from './engine.js';
import { startPipeline } from './pipeline-engine.js';
import { learningRate } from './schedule.js';

export type { Emit } from './engine.js';

/** A checkpoint to continue from, refused when it holds another model than the job's. */
async function loadResume(job: TrainJob): Promise<ResumedState | null> {
  if (!job.resume_from) return null;
  const resumed = await loadTrainingCheckpoint(job.resume_from);
  const c = resumed.manifest.config;
  const m = job.model;
  if (c.n_layer !== m.n_layer || c.n_head !== m.n_head || c.d_model !== m.d_model || c.block_size !== m.block_size)
    throw new Error(`checkpoint ${job.resume_from} holds a different model (${JSON.stringify(c)}) than the run's config`);
  return resumed;
}

export async function runTraining(job: TrainJob, emit: Emit): Promise<void> {
  const t = job.train;
  const par = job.parallel ?? DEFAULT_PARALLEL;
  // the strategy table's rules, the same the CLI, the controller and the launch form apply
  const broken = TABLE[par.strategy].validate({ ...job, parallel: par });
  if (broken.length > 0) throw new Error(broken[0]!.message);
  const resumed = await loadResume(job);
  // a compressed run's hook states (fresh under another compression or number of ranks)
  const resumedHooks = resumed && resumedHookStates(resumed.commHook, job);
  const scaling = new StepScaling(job, resumed?.lossScaler);
  const T = t.seq_len ?? job.model.block_size;
  if (T > job.model.block_size) throw new Error(`train.seq_len ${T} is larger than model.block_size ${job.model.block_size}`);
  const B = t.batch_size;
  const init = !resumed && job.init_from ? loadHfInit(job.init_from) : null; // --init-from: an HF folder's weights and vocabulary
  const data = loadDataset(job.data.dataset, T, resumed ? CharTokenizer.fromJSON(resumed.manifest.tokenizer) : init?.tokenizer);
  const config = validateGptConfig({
    n_layer: job.model.n_layer,
    n_head: job.model.n_head,
    d_model: job.model.d_model,
    block_size: job.model.block_size,
    vocab_size: data.tokenizer.vocabSize,
  });
  const adamw = { lr: t.lr, beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weight_decay, maxGradNorm: t.grad_clip };
  const joined: { world: World | null } = { world: null };
  const join = async () => (joined.world = await joinWorld((port) => emit({ type: 'store', port })));
  try {
    // a pipelined strategy's ranks each run one stage; the others' each run the whole depth
    const start = TABLE[par.strategy].pipelined ? startPipeline : startDataParallel;
    const engine = await start({ job, par, grid: TABLE[par.strategy].grid(par), config, data, B, T, adamw, emit, join });
    const { rt, rank } = engine;
    // every rank starts from the single-device initial weights (each takes its part)
    engine.load(
      resumed?.params ?? init?.params(config) ?? initialFullParams(config, t.seed),
      resumed && { m: resumed.m, v: resumed.v, step: resumed.manifest.optimizer_step },
      resumedHooks,
    );
    const startStep = resumed?.manifest.step ?? 0;
    await rt.sync();
    await engine.setup();

    const m = par.micro_batches;
    const { rank: replica, size: replicas } = engine.replica;
    const train = new BatchSampler(data.train, { batchSize: B, blockSize: T, seed: t.seed, stream: STREAM_TRAIN });
    const val = new BatchSampler(data.val, { batchSize: B / replicas / m, blockSize: T, seed: t.seed, stream: STREAM_VAL });
    // this rank's FLOPs per step (flops.ts): its replica's rows through its share of the model
    const flops = rankStepFlops(config, T, B / replicas, { checkpointing: t.activation_checkpointing, share: engine.flopsShare });
    const evalBatches = Array.from({ length: t.eval_batches }, (_, i) => val.batchAt(i));
    await emit({
      type: 'ready',
      rank,
      adapter: { ...engine.adapter },
      vocab_size: config.vocab_size,
      params: engine.paramCount,
      start_step: startStep,
      memory: currentBytes(rt.allocator),
    });

    const pg = joined.world?.pg ?? null;
    const traffic = new StepTraffic(() => pg?.peerBytes() ?? []);
    const due = (interval: number, step: number) => interval > 0 && (step % interval === 0 || step === t.steps);
    const control = new StepAgreement(t, pg, rank); // checkpoint by steps or minutes, and stop, on the same step everywhere
    // the whole model gathered to the usual layout (collective), written by the rank that has it
    const save = async (step: number, run_dir: string) => {
      const { params, state, hooks } = (await engine.gatherCheckpoint()) ?? {};
      const [tokenizer, commHook, lossScaler] = [data.tokenizer.toJSON(), hookRecord(job, hooks), scaling.state()];
      return (
        params && state && saveTrainingCheckpoint({ ...job, run_dir }, { step, config, tokenizer, params, state, commHook, lossScaler })
      );
    };
    const atLoad = checkpointAtLoadDir(job.run_dir); // the loaded state as it was read, for a resume's proof (checkpoint/at-load.ts)
    if (atLoad) await save(startStep, atLoad);
    let lastLoss = NaN;
    for (let step = startStep + 1; step <= t.steps; step++) {
      const t0 = performance.now();
      traffic.begin();
      pg?.telemetry.takeSpans(true); // this step's spans only
      engine.zeroGrad();
      const scale = scaling.scale;
      await engine.forwardBackward((k) => train.microBatchAt(step - 1, replica, replicas, k, m), scale);
      const lr = learningRate(step, { lr: t.lr, min_lr: t.min_lr, warmup_steps: t.warmup_steps, steps: t.steps });
      const { gradNorm, fields: scaled } = scaling.settle(await engine.optimizerStep(lr, scale), scale);
      traffic.end(); // the step's own traffic (not checkpoint gathers)
      const loss = await engine.readLoss();
      const stepMs = performance.now() - t0;
      lastLoss = loss;
      const spans = await engine.stepSpans(step, pg?.telemetry.takeSpans(true) ?? []);
      if (spans) await emit(spans);
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
        flops,
        memory: { ...currentBytes(rt.allocator), ...engine.hostBytes() },
        ...scaled,
      });
      throwIfDiverged(job, step, { loss, grad_norm: gradNorm }); // after the step's message: the controller words the verdict
      if (due(t.eval_interval, step)) {
        const valLoss = await engine.evaluate(evalBatches);
        if (valLoss !== null) await emit({ type: 'eval', step, val_loss: valLoss });
        throwIfDiverged(job, step, { val_loss: valLoss });
      }
      const saving = stateSave(job, (await control.agree(step)).checkpoint); // a checkpoint, else an elastic run's replica
      if (saving) {
        const path = await save(step, saving.run_dir);
        if (path) await emit({ type: saving.type, step, path });
      }
      if (control.stoppedAt !== null) break;
    }
    const steps = t.steps - startStep;
    if (control.stoppedAt === null)
      await emit({
        type: 'done',
        rank,
        steps: t.steps,
        final_loss: lastLoss,
        peak_bytes: { ...peakBytes(rt.allocator), ...engine.hostBytes() },
        params: engine.paramCount,
        ...scaling.summary(),
        ...(pg ? trafficFields(traffic.perStep(steps)) : {}),
        ...(await engine.summary(steps)),
      });
    if (pg) {
      await pg.barrier().wait();
      // every rank passed the barrier above before anyone closes its links: a fast rank's close
      // must not reach a peer still finishing the barrier's last round (it would abort that peer)
      await pg.store.barrier('end-of-run', pg.size, 60_000).catch(() => {});
    }
    rt.destroy();
  } finally {
    joined.world?.pg.destroy();
    await joined.world?.store?.close();
  }
}
