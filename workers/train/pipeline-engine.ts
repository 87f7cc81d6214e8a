// The engine of the strategies whose ranks each run one pipeline stage: pp (world = P stages)
// and 3d (D x T x P ranks, protocol/grid.ts: the rank is TP shard `tp` of stage `pp` of
// data-parallel replica `dp`). Per step the stage runs the schedule's action list over the m
// micro-batches of its replica's rows (the first stage reads their tokens, the last their
// targets; TP collectives inside every forward/backward under 3d); then the tied wte's gradient
// summed over the embedding group, and the stage's optimizer: AdamW, or with D > 1 replicas
// ZeRO-1 across the DP group (zero1.ts: reduce-scatter the gradients, AdamW moments of 1/D of
// the stage's flat layout, all-gather the weights), with the global gradient norm over the TP
// shards and the stages (grad-norm.ts). The last stage's TP rank 0 reports its replica's share
// of the loss. Mixed precision: the stage at 16 bits with the fp32 master in its optimizer
// (pipeline.ts; weights in and out through precision/rank-weights.ts), every stage's overflow
// verdict from the one global norm.
import { TABLE } from '../../common/strategies.js';
import type { ProcessGroup, World } from '../comm/index.js';
import { openDevice } from '../gpu/device.js';
import { stepClock } from '../gpu/step-clock.js';
import { Runtime } from '../gpu/runtime.js';
import { paramCount } from '../model/config.js';
import { vocabAlign } from '../model/tp-layout.js';
import { AdamW } from '../optim/adamw.js';
import { GradSquares, type NormParts, reduceNormSq, shardSquares } from '../parallel/grad-norm.js';
import { PipelineStage, type StageSpan } from '../parallel/pipeline.js';
import { gatherStages } from '../parallel/pipeline-checkpoint.js';
import { LocalOptimizer, type RankStrategy } from '../parallel/strategy.js';
import { unshardOverGroup } from '../parallel/tensor-parallel.js';
import { Zero1 } from '../parallel/zero1.js';
import { profileLayerTimes, sharePartition, type TimedPartition } from '../parallel/pipeline-profile.js';
import { partitionByTime, stageMs } from '../parallel/pipeline-schedule.js';
import { rankWeights } from '../precision/rank-weights.js';
import { COMM_ENV } from '../protocol/comm.js';
import { coordsOf, dpGroups, embeddingGroups, type Grid, ppGroups, tpGroups } from '../protocol/grid.js';
import { precisionOf } from '../protocol/train.js';
import { spansMessage } from '../telemetry/spans-message.js';
import type { RankEngine, RunSetup } from './engine.js';

const WTE = 'transformer.wte.weight';

/** Every rank creates every group of the grid, in the same order (newGroup's contract); returns its own. */
async function gridGroups(world: World, g: Grid) {
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

export async function startPipeline(s: RunSetup): Promise<RankEngine> {
  const { job, par, config, B, T, grid } = s;
  // the table says whether the stage is split over a tensor-parallel group (3d: the grid's groups; pp: the world is the pipeline)
  const { tensorParallel } = TABLE[par.strategy];
  const m = par.micro_batches;
  const rank = Number(process.env[COMM_ENV.rank] ?? 0);
  const me = coordsOf(grid, rank);
  const byTime = par.partition === 'time';
  // --partition time: rank 0 measures every layer at the micro-batch size before it joins (the
  // other ranks start once it has), and every stage takes its split from the store
  const measured: TimedPartition | null =
    byTime && rank === 0
      ? await (async () => {
          const times = await profileLayerTimes(config, {
            adapter: job.device.adapter,
            B: B / grid.dp / m,
            T,
            checkpointing: job.train.activation_checkpointing,
            seed: job.train.seed,
          });
          return { times, ranges: partitionByTime(times, grid.pp) };
        })()
      : null;
  const opened = await openDevice(job.device.adapter);
  const rt = new Runtime(opened);
  const precision = precisionOf(job);
  const build = (partition?: readonly { from: number; to: number }[]) =>
    new PipelineStage(
      rt,
      config,
      { rank: me.pp, size: grid.pp },
      {
        schedule: par.schedule ?? '1f1b',
        m,
        B: B / grid.dp / m,
        T,
        lossScale: 1 / (B * T),
        checkpointing: job.train.activation_checkpointing,
        stageDelayMs: par.stage_delay_ms ?? 0,
        partition,
        precision,
      },
      tensorParallel ? { group: { rank: me.tp, size: grid.tp }, partitionActivations: par.partition_activations ?? true } : null,
    );
  // build the stage (and compile its kernels) before joining where the split is known: a rank
  // blocked in compilation for seconds cannot answer its peers' heartbeats
  let stage = byTime ? null : build();
  const world = await s.join();
  if (world.rank !== rank || world.size !== par.world)
    throw new Error(`rank ${world.rank} of ${world.size} joined a ${par.strategy} run laid out for rank ${rank} of ${par.world}`);
  const timed = byTime ? await sharePartition(world.pg, measured) : null;
  stage ??= build(timed!.ranges);
  const groups = tensorParallel ? await gridGroups(world, grid) : { pp: world.pg, tp: null, dp: null };
  stage.attach(groups.pp, groups.tp ?? undefined, groups.dp ?? undefined);
  const st = stage;
  // the gradients this rank counts in the global norm: the last stage's wte copy is the first stage's
  const parts: NormParts = { tensorParallel, skip: st.range.last && !st.range.first ? WTE : undefined };
  const normGroups = { tp: groups.tp, pp: groups.pp };
  const params = st.params;
  const squares = grid.dp > 1 ? null : new GradSquares(rt, params, parts);
  const optimizer: RankStrategy = squares
    ? new LocalOptimizer({ rt, opt: new AdamW(rt, params, s.adamw) }, async () => reduceNormSq(await squares.read(), normGroups))
    : new Zero1({ rt, pg: groups.dp!, model: { params } }, s.adamw, {
        labels: { dp: 1 },
        normSq: (shard, start) => reduceNormSq(shardSquares(params, shard, start, parts), { ...normGroups, dp: groups.dp }),
      });
  // the stage's tensors from the single-device layout (3d: its TP shards of them) and back
  const weights = rankWeights(precision, config, params, optimizer, groups.tp && { size: grid.tp, rank: me.tp });
  const whole = (t: Map<string, Float32Array>) => unshardOverGroup(config, params.refs, t, groups.tp, vocabAlign(precision));

  // the rank that reports the loss of its replica's rows: last stage, TP rank 0
  const reportsLoss = st.range.last && me.tp === 0;
  // the device follows every layer pass (the stage measures its own spans from its reads)
  const clock = stepClock(rt, job, { model: config, B: B / grid.dp / m, T, tp: grid.tp }, false);
  clock.follow(st.slots);
  let computeSpans: StageSpan[] = [];
  let p2pBytes = 0;
  let embBytes = 0;
  return {
    rank,
    rt,
    adapter: opened.report,
    paramCount: paramCount(config),
    replica: { rank: me.dp, size: grid.dp },
    flopsShare: { layers: st.range.to - st.range.from, lm_head: st.range.last, tp: grid.tp },
    load: (full, state) => weights.load(full, state),
    async setup() {
      await st.setup(world.pg, tensorParallel ? embeddingGroups(grid) : undefined);
      await optimizer.setup();
    },
    zeroGrad() {
      clock.beginStep();
      st.zeroGrad();
    },
    async forwardBackward(batch, lossScale = 1) {
      st.setLossScale(lossScale);
      computeSpans = await st.runStep(batch);
    },
    async optimizerStep(lr, lossScale = 1) {
      try {
        await st.syncTiedEmbedding();
        await optimizer.finishGradients();
        clock.optimizer(); // after the tied embedding's sync, where the update is recorded
        const norm = await optimizer.optimizerStep(lr, lossScale);
        await rt.sync(); // the update belongs to this step, not to the next micro-batch's forward span
        return norm;
      } catch (e) {
        throw st.named(e, 'the optimizer step');
      }
    },
    async readLoss() {
      const loss = await st.readLoss();
      return reportsLoss ? loss : 0;
    },
    async evaluate(batches) {
      // every stage and replica runs the same validation batches (TP collectives need the whole group)
      let total = 0;
      for (const b of batches) total += (await st.evalBatch(b)) ?? 0;
      return reportsLoss && me.dp === 0 ? total / batches.length : null;
    },
    async gatherCheckpoint() {
      // the DP replicas hold the same weights: replica 0 gathers (after the moments' all-gather, a DP collective)
      const state = (await optimizer.optimizerState())!;
      if (me.dp !== 0) return null;
      // mixed precision: the fp32 master is the checkpoint's weights
      const own = { params: await whole(state.master ?? (await params.readParams())), m: await whole(state.m), v: await whole(state.v) };
      // whole tensors of the stage from its TP shards; TP rank 0 takes part in the pipeline gather
      if (me.tp !== 0) return null;
      const all = await gatherStages(groups.pp, config, st.ranges, own);
      return all && { params: all.params, state: { m: all.m, v: all.v, step: state.step } };
    },
    async stepSpans(step, comm) {
      await clock.drain(); // closes the step's device time
      // payload bytes this rank sent: boundary activations/gradients, and its part of the tied-wte all-reduce
      p2pBytes += comm.filter((x) => x.op.startsWith('send[')).reduce((a, x) => a + x.bytes, 0);
      embBytes += comm.filter((x) => x.group === 'embedding' && x.op.startsWith('allReduce')).reduce((a, x) => a + x.bytes, 0);
      const name = `stage.${st.stage}`;
      const spans = computeSpans.map((x) => ({ kind: x.kind, name, stage: st.stage, micro: x.micro, start: x.start, end: x.end }));
      return spansMessage(rank, step, spans, comm, st.stage);
    },
    hostBytes: () => ({}),
    summary(steps) {
      const per = (x: number) => (steps > 0 ? x / steps : 0);
      return {
        p2p_bytes_per_step: per(p2pBytes),
        embedding_allreduce_bytes_per_step: per(embBytes),
        stage: {
          index: st.stage,
          from: st.range.from,
          to: st.range.to,
          slots: st.slots.length,
          params: st.params.count,
          ...(timed ? { partition: 'time' as const, profiled_ms: stageMs(timed.times, st.range) } : { partition: 'params' as const }),
        },
        ...clock.summary(),
      };
    },
  };
}
