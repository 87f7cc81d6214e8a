// The engine of the strategies whose ranks each run the whole depth of the model: single, dp,
// ddp, zero1/2/3 (with ZeRO-Offload) and tp. The rank builds its replica (tp: its shard), the
// strategy wraps it (parallel/*.ts: gradient sync, sharded or replicated optimizer), and every
// micro-batch runs forward, the strategy's beforeBackward, backward; then finishGradients.
// Mixed precision: the model computes at the run's precision; its weights cross to and from
// checkpoints through precision/rank-weights.ts (bf16/fp16: the optimizer's fp32 master).
import { TABLE } from '../../common/strategies.js';
import type { ProcessGroup, World } from '../comm/index.js';
import { createCommHook, gatherHookStates, halfGradientsOf } from '../comm-hooks/index.js';
import type { Batch } from '../data/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { type GradientWire, stepClock } from '../gpu/step-clock.js';
import { Gpt } from '../model/gpt.js';
import { ParamStore } from '../model/params.js';
import { tpParamSpecs, vocabAlign } from '../model/tp-layout.js';
import { AdamW, type AdamwConfig } from '../optim/adamw.js';
import { Ddp } from '../parallel/ddp.js';
import { ParameterServerDp } from '../parallel/dp.js';
import { LocalOptimizer, type RankStrategy } from '../parallel/strategy.js';
import { GroupTpOps, TensorParallel } from '../parallel/tensor-parallel.js';
import { Zero1 } from '../parallel/zero1.js';
import { Zero2 } from '../parallel/zero2.js';
import { Zero3 } from '../parallel/zero3.js';
import { rankWeights } from '../precision/rank-weights.js';
import { coordsOf } from '../protocol/grid.js';
import { type ParallelSpec, precisionOf } from '../protocol/train.js';
import { LayerSpans } from '../telemetry/layer-spans.js';
import type { RankEngine, RunSetup } from './engine.js';

interface KindContext {
  rt: Runtime;
  model: Gpt;
  pg: World['pg'];
  /** tp: the tensor-parallel group (every rank) */
  tp: ProcessGroup | null;
  adamw: AdamwConfig;
  par: ParallelSpec;
  /** the run's seed (PowerSGD's random starts) */
  seed: number;
  /** how the device puts DDP's buckets on the wire */
  gradients: GradientWire;
}

const adamwOf = (c: KindContext) => new AdamW(c.rt, c.model.params, c.adamw);
const offload = (c: KindContext) => c.par.offload_optimizer === 'cpu';
const halfGradients = (c: KindContext) => halfGradientsOf(c.par.grad_compression);

/** The strategy around the model, as the table describes it; it makes the optimizer where this rank keeps one. */
function wrap(c: KindContext): RankStrategy {
  const s = TABLE[c.par.strategy];
  if (s.oneRank) return new LocalOptimizer({ ...c, opt: adamwOf(c) });
  if (s.tensorParallel) return new TensorParallel({ rt: c.rt, model: c.model, opt: adamwOf(c), tp: c.tp! });
  // the parameter server keeps the only optimizer, on rank 0
  if (s.optimizerRanks === 'rank0') return new ParameterServerDp({ ...c, opt: c.pg.rank === 0 ? adamwOf(c) : null });
  if (s.bucketAllReduce) {
    const commHook = createCommHook(c.par.grad_compression, c.seed, { rt: c.rt, world: c.pg.size, ...c.gradients.hook });
    return new Ddp(
      { ...c, pg: c.gradients.bucketGroup(c.pg, commHook !== null), opt: adamwOf(c) },
      { bucketCapBytes: c.par.bucket_cap_mb * 2 ** 20, firstBucketBytes: c.par.first_bucket_mb * 2 ** 20, commHook },
    );
  }
  if (s.zeroStage === 1)
    return c.model.params.gradBuckets.length > 0
      ? new Zero2({ ...c, opt: null }, c.adamw, { offload: true })
      : new Zero1(c, c.adamw, { offload: offload(c), halfGradients: halfGradients(c) });
  if (s.zeroStage === 2) return new Zero2({ ...c, opt: null }, c.adamw, { offload: offload(c), halfGradients: halfGradients(c) });
  return new Zero3({ ...c, opt: null }, c.adamw, { prefetch: c.par.prefetch ?? true });
}

/**
 * The parameter store a ZeRO stage needs: ZeRO-2 keeps gradients in constant-size bucket buffers,
 * ZeRO-3 partitions the weights too. ZeRO-Offload at 16 bits keeps no gradient arena on the device
 * (its split: the 16-bit gradient shard on the host): zero1's gradients leave backward through
 * zero2's buckets; with the optimizer on the host both stages partition them there.
 */
function storeOf(par: ParallelSpec, mixed: boolean): 'bucketed' | 'partitioned' | undefined {
  const z = TABLE[par.strategy].zeroStage;
  if (z === 3) return 'partitioned';
  return z === 2 || (z === 1 && mixed && par.offload_optimizer === 'cpu') ? 'bucketed' : undefined;
}

export async function startDataParallel(s: RunSetup): Promise<RankEngine> {
  const { job, par, config, B, T } = s;
  const world = TABLE[par.strategy].oneRank ? null : await s.join();
  const rank = world?.rank ?? 0;
  const replica = { rank: coordsOf(s.grid, rank).dp, size: s.grid.dp };
  const opened = await openDevice(job.device.adapter);
  const rt = new Runtime(opened);
  const m = par.micro_batches;
  const precision = precisionOf(job);
  const store = storeOf(par, precision !== 'fp32');
  const params = store
    ? new ParamStore(rt, config, {
        gradBucketBytes: Math.max(par.bucket_cap_mb * 2 ** 20, 1),
        partitionParams: store === 'partitioned',
        precision,
        // 16-bit: wte's rows padded as the model pads them (the model's own store does the same)
        ...(precision !== 'fp32' ? { specs: tpParamSpecs(config, 1, vocabAlign(precision)) } : {}),
      })
    : undefined;
  // tensor parallel: one group of every rank (TP ranks adjacent, Megatron's order)
  const tpGroup = TABLE[par.strategy].tensorParallel
    ? await world!.pg.newGroup(
        Array.from({ length: par.world }, (_, i) => i),
        { name: 'tp' },
      )
    : null;
  // the whole replica, or (tp) this rank's shard of it
  const model = new Gpt(rt, config, {
    B: B / replica.size / m,
    T,
    checkpointing: job.train.activation_checkpointing,
    lossScale: 1 / (B * T),
    params,
    tp: tpGroup ? { ops: new GroupTpOps(rt, tpGroup), partitionActivations: par.partition_activations ?? true } : undefined,
    precision,
  });
  // per-layer compute spans (and the comm spans beside them) unless the job turned them off
  const spansOn = world !== null && job.telemetry?.spans !== false;
  const clock = stepClock(rt, job, { model: config, B: B / replica.size / m, T, tp: tpGroup?.size ?? 1 }, spansOn);
  const strategy = wrap({
    rt,
    model,
    pg: world?.pg as World['pg'],
    tp: tpGroup,
    adamw: s.adamw,
    par,
    seed: job.train.seed,
    gradients: clock.gradients,
  });
  const weights = rankWeights(precision, config, model.params, strategy, tpGroup);
  const spans = clock.marks ? new LayerSpans(clock, model.hooks, rank, spansOn) : null;

  const evaluate = async (batches: readonly Batch[]) => {
    let total = 0;
    for (const b of batches) {
      model.setBatch(b.inputs, b.targets);
      await model.forward('eval');
      const losses = await model.readLosses();
      let sum = 0;
      for (const x of losses) sum += x;
      total += sum / losses.length;
    }
    return total / batches.length;
  };

  return {
    rank,
    rt,
    adapter: opened.report,
    paramCount: model.params.count,
    replica,
    load(full, state, hooks) {
      weights.load(full, state);
      const mine = hooks?.[replica.rank];
      if (mine && strategy.loadCommHookState) strategy.loadCommHookState(mine);
    },
    setup: () => strategy.setup(),
    zeroGrad() {
      clock.beginStep();
      model.zeroGrad();
    },
    async forwardBackward(batch, lossScale = 1) {
      model.setLossScale(lossScale);
      for (let k = 0; k < m; k++) {
        const b = batch(k);
        model.setBatch(b.inputs, b.targets);
        await model.forward('train');
        strategy.beforeBackward(k === m - 1);
        await model.backward();
      }
      await strategy.finishGradients();
    },
    optimizerStep(lr, lossScale = 1) {
      clock.optimizer();
      return strategy.optimizerStep(lr, lossScale);
    },
    // the tensor-parallel ranks all hold the whole loss: rank 0 reports it
    async readLoss() {
      const loss = await model.readLoss();
      return tpGroup && rank !== 0 ? 0 : loss;
    },
    async evaluate(batches) {
      // where no rank holds the whole weights (ZeRO-3, TP), the forward pass is collective: every rank evaluates
      if (rank === 0) return evaluate(batches);
      if (strategy.fullParams) await evaluate(batches);
      return null;
    },
    async gatherCheckpoint() {
      const state = await strategy.optimizerState(); // collective where the state is sharded
      const gathered = strategy.fullParams ? await strategy.fullParams() : null; // collective
      const hook = (await strategy.commHookState?.()) ?? null;
      const hooks = hook && world ? await gatherHookStates(world.pg, hook) : null; // collective
      if (rank !== 0 || !state) return null;
      return { ...(await weights.whole(state, gathered)), ...(hooks ? { hooks } : {}) };
    },
    stepSpans: async (step, comm) => (spans ? spans.message(step, comm) : null),
    hostBytes: () => strategy.hostBytes?.() ?? {},
    flopsShare: { tp: tpGroup?.size ?? 1 },
    summary: async () => ({
      ...(world ? { ...spans?.summary(), ...(await strategy.summary?.()) } : {}),
      ...clock.summary(),
    }),
  };
}
