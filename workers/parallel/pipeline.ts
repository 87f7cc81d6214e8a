// Pipeline parallelism (GPipe / 1F1B), the executor of one stage. The model stays free of the
// network: a stage is a Gpt built with `stage: {from, to, first, last}` over a ParamStore that
// holds only the stage's parameters; this file moves the boundary activations (resid[to], B*T*C
// floats per micro-batch) forward and their gradients backward with tagged send/recv, in the
// order the schedule gives (pipeline-schedule.ts).
//
// Activation slots: every micro-batch in flight keeps its own activations, so a stage builds as
// many model instances (sharing parameters and backward scratch) as its action list has
// micro-batches in flight: m under GPipe, min(p - stage, m) under 1F1B.
//
// Tied embedding (Megatron): the first stage owns wte for the embedding, the last a copy for
// the LM head; both start from the same values, and after backward their wte gradients are
// summed over the two-rank "embedding group", so both copies take the same update and training
// equals the single-device model. The global gradient norm sums each stage's squared norm over
// the world (the last stage leaves its wte copy out: it is counted once, on the first stage).
//
// 3D: with a tensor-parallel group the slots hold this rank's shards of the stage (Megatron's
// tensor-parallel layers inside a pipeline stage); the boundary tensor is the full resid, the
// same on every TP rank, sent between ranks of equal TP rank. The norm sums the sharded
// gradients over the TP group and adds the replicated ones once, then sums over the stages.
import type { ProcessGroup, WorldGroup } from '../comm/index.js';
import { CommError, nowMs } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import { viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { sumSquares } from '../kernels/reduce.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import { Gpt } from '../model/gpt.js';
import { type StageRange, stageOwns } from '../model/stage.js';
import { shardKind, shardModel, tpParamSpecs, unshardTensor } from '../model/tp-layout.js';
import { ParamStore, slotElems } from '../model/params.js';
import { AdamW, type AdamwConfig } from '../optim/adamw.js';
import { ShardedAdamW } from '../optim/sharded-adamw.js';
import { maxInFlight, partitionLayers, type PipelineAction, type PipelineSchedule, stageActions } from './pipeline-schedule.js';
import type { OptimizerState } from './strategy.js';
import { type GroupPlace, GroupTpOps } from './tensor-parallel.js';
import { shardBounds } from './zero1.js';

const TAG_ACT = 1;
const TAG_GRAD = 2;
const TAG_CKPT = 3;
const TAG_EVAL = 4;
const WTE = 'transformer.wte.weight';

/**
 * The stage ranges of a model split over p stages: balanced by parameter count, or the given
 * block ranges (a partition by measured time, pipeline-profile.ts).
 */
export function stageRanges(config: GptConfig, p: number, blocks?: readonly { from: number; to: number }[]): StageRange[] {
  if (blocks) {
    const ok =
      blocks.length === p &&
      blocks.every((r, s) => r.from === (s === 0 ? 0 : blocks[s - 1]!.to) && r.to > r.from) &&
      blocks[p - 1]!.to === config.n_layer;
    if (!ok)
      throw new Error(
        `pipeline partition ${JSON.stringify(blocks)} does not split the ${config.n_layer} blocks into ${p} consecutive non-empty stages`,
      );
    return blocks.map((r, s) => ({ from: r.from, to: r.to, first: s === 0, last: s === p - 1 }));
  }
  const numel = (n: string) =>
    paramSpecs(config)
      .find((s) => s.name === n)!
      .shape.reduce((a, b) => a * b, 1);
  const block = paramSpecs(config)
    .filter((s) => s.name.startsWith('transformer.h.0.'))
    .reduce((s, x) => s + x.shape.reduce((a, b) => a * b, 1), 0);
  const emb = numel(WTE) + numel('transformer.wpe.weight');
  const head = numel(WTE) + numel('transformer.ln_f.weight') + numel('transformer.ln_f.bias');
  return partitionLayers(config.n_layer, p, block, emb, head).map((r, s) => ({ ...r, first: s === 0, last: s === p - 1 }));
}

/** Parameters a stage contributes to the whole model's checkpoint (wte once: from the first stage). */
function checkpointNames(config: GptConfig, r: StageRange): string[] {
  return paramSpecs(config)
    .map((s) => s.name)
    .filter((n) => stageOwns(r, n) && !(n === WTE && !r.first));
}

export interface PipelineOptions {
  schedule: PipelineSchedule;
  /** micro-batches per step */
  m: number;
  /** rows per micro-batch */
  B: number;
  T: number;
  lossScale: number;
  checkpointing: boolean;
  /** each micro-batch's forward lasts at least this many ms and its backward twice that: equal-cost stages for bubble measurements */
  stageDelayMs: number;
  /** the block range [from, to) of every stage (the same on every rank); default: balanced by parameter count */
  partition?: readonly { from: number; to: number }[];
}

/** 3D: the stage is split over a tensor-parallel group. */
export interface StageTensorParallel {
  /** the group, or the rank's place in it until attach() */
  group: ProcessGroup | GroupPlace;
  partitionActivations?: boolean;
  /**
   * the data-parallel group's size and this rank's place in it: with more than one replica, ZeRO-1
   * across it (each replica keeps the AdamW moments of 1/D of the stage's flat shard layout;
   * gradients reduce-scattered, updated weights all-gathered). attach() gives the group.
   */
  dataParallel?: GroupPlace;
}

/** One compute span of the step, on the epoch-ms clock of the comm spans. */
export interface StageSpan {
  kind: 'forward' | 'backward';
  micro: number;
  start: number;
  end: number;
}

export class PipelineStage {
  readonly p: number;
  readonly stage: number;
  readonly range: StageRange;
  /** every stage's range (gather() unpacks the others' parameters by them) */
  readonly ranges: StageRange[];
  readonly params: ParamStore;
  readonly slots: Gpt[];
  readonly actions: PipelineAction[];
  /** the stage's AdamW (null under 3D's ZeRO-1: then zero holds the DP shard's) */
  readonly opt: AdamW | null;
  /** 3D with D > 1: ZeRO-1 over the DP group, AdamW over flat elements [bounds[r], bounds[r+1]) */
  private readonly zero: { opt: ShardedAdamW; bounds: number[]; counts: number[]; rank: number } | null = null;
  private dpGroup: ProcessGroup | null = null;
  private readonly sumSq: GpuTensor;
  private readonly normKernel: Dispatch[];
  /** 3D: squared norm of the replicated (not TP-sharded) gradients, counted once */
  private readonly replicatedSq: GpuTensor | null = null;
  private embGroup: ProcessGroup | null = null;
  private readonly boundary: number;
  private group: ProcessGroup | null;
  private tpOps: GroupTpOps | null = null;
  private tpGroup: ProcessGroup | null = null;

  constructor(
    private readonly rt: Runtime,
    readonly config: GptConfig,
    /**
     * the pipeline group: stage = group rank (the world for --strategy pp; one PP group of the 3D
     * grid), or only the stage's place in it: then attach() the groups before setup(). 3D builds
     * the stage (compiling its kernels, seconds on a busy CPU) before joining the world, so no
     * peer waits on a rank that cannot answer heartbeats.
     */
    pg: ProcessGroup | GroupPlace,
    private readonly o: PipelineOptions,
    adamw: AdamwConfig,
    /** 3D: this stage's tensor-parallel group */
    readonly tp: StageTensorParallel | null = null,
  ) {
    this.p = pg.size;
    this.stage = pg.rank;
    this.group = 'allReduce' in pg ? pg : null;
    this.ranges = stageRanges(config, this.p, o.partition);
    this.range = this.ranges[this.stage]!;
    this.params = new ParamStore(rt, config, undefined, false, tp ? tpParamSpecs(config, tp.group.size) : undefined, (n) =>
      stageOwns(this.range, n),
    );
    this.actions = stageActions(o.schedule, this.p, this.stage, o.m);
    const nSlots = maxInFlight(this.actions);
    const base = { B: o.B, T: o.T, checkpointing: o.checkpointing, lossScale: o.lossScale, stage: this.range };
    if (tp) {
      this.tpOps = new GroupTpOps(rt, tp.group);
      if ('allReduce' in tp.group) this.tpGroup = tp.group;
    }
    const tpOptions = this.tpOps ? { ops: this.tpOps, partitionActivations: tp?.partitionActivations ?? true } : undefined;
    const first = new Gpt(rt, config, { ...base, params: this.params, actsPrefix: 'slot0.', tp: tpOptions });
    this.slots = [first];
    for (let k = 1; k < nSlots; k++)
      this.slots.push(
        new Gpt(rt, config, { ...base, params: this.params, scratch: first.scratch, actsPrefix: `slot${k}.`, tp: tpOptions }),
      );
    this.boundary = o.B * o.T * config.d_model;
    const dp = tp?.dataParallel;
    if (dp && dp.size > 1) {
      const bounds = shardBounds(this.params.flatElems, dp.size);
      const counts = Array.from({ length: dp.size }, (_, r) => bounds[r + 1]! - bounds[r]!);
      this.zero = { opt: new ShardedAdamW(rt, this.params, adamw, bounds[dp.rank]!, bounds[dp.rank + 1]!), bounds, counts, rank: dp.rank };
      this.opt = null;
    } else this.opt = new AdamW(rt, this.params, adamw);
    // the squared norm of this stage's gradients, leaving out the last stage's wte copy
    const skipWte = this.range.last && !this.range.first;
    this.sumSq = rt.allocator.tensor('pp.grad_norm_sq', 'workspace', [1]);
    if (!tp) {
      const skip = skipWte ? slotElems(this.params.get(WTE).numel) : 0;
      const grads = this.params.refs[0]!.grad;
      this.normKernel = sumSquares(rt, {
        out: this.sumSq,
        inp: viewOf(grads, 'grads(stage norm)', skip, this.params.flatElems - skip),
        n: this.params.flatElems - skip,
      });
      return;
    }
    // sharded gradients into sumSq (summed over the TP group), replicated ones into replicatedSq
    this.replicatedSq = rt.allocator.tensor('pp.grad_norm_sq.replicated', 'workspace', [1]);
    this.normKernel = [];
    const started = new Set<GpuTensor>();
    for (const r of this.params.refs) {
      if (r.name === WTE && skipWte) continue;
      const out = shardKind(r.name) === 'replicated' ? this.replicatedSq : this.sumSq;
      this.normKernel.push(...sumSquares(rt, { out, inp: r.grad, n: r.numel, accumulate: started.has(out) }));
      started.add(out);
    }
    for (const t of [this.sumSq, this.replicatedSq]) if (!started.has(t)) rt.write(t, new Float32Array(1));
  }

  /** The pipeline group (and 3D's tensor-parallel group) of a stage built from its place only. */
  attach(pp: ProcessGroup, tp?: ProcessGroup, dp?: ProcessGroup) {
    if (this.zero) {
      if (!dp || dp.rank !== this.zero.rank || dp.size !== this.zero.counts.length)
        throw new Error(`data-parallel group: built for rank ${this.zero.rank} of ${this.zero.counts.length}`);
      this.dpGroup = dp;
    }
    if (pp.rank !== this.stage || pp.size !== this.p)
      throw new Error(`pipeline group: stage ${this.stage} of ${this.p} attached to rank ${pp.rank} of ${pp.size}`);
    this.group = pp;
    if (this.tpOps && tp) {
      this.tpOps.bind(tp);
      this.tpGroup = tp;
    }
  }

  private get pg(): ProcessGroup {
    if (!this.group) throw new Error('pipeline stage: attach() the pipeline group first');
    return this.group;
  }

  private get tpg(): ProcessGroup {
    if (!this.tpGroup) throw new Error('pipeline stage: attach() the tensor-parallel group first');
    return this.tpGroup;
  }

  /**
   * The embedding group: the first and last stage of this pipeline (global ranks). Every rank of
   * the world takes part in creating each group, in the same order (c10d's new_group).
   */
  async setup(world: WorldGroup, embeddingGroups: readonly (readonly number[])[] = [[this.pg.ranks[0]!, this.pg.ranks[this.p - 1]!]]) {
    for (const ranks of embeddingGroups) {
      const g = await world.newGroup(ranks, { name: 'embedding' });
      if (g) this.embGroup = g;
    }
    if (this.embGroup) {
      // both copies of wte start from the first stage's values
      const wte = this.params.get(WTE);
      const data = await this.rt.read(wte.param);
      await this.embGroup.broadcast(data, { root: 0, labels: { what: 'tied wte' } }).wait();
      this.rt.write(wte.param, data);
    }
  }

  zeroGrad() {
    this.params.zeroGrad();
    for (const s of this.slots) this.rt.clear(s.lossAcc);
  }

  /**
   * Runs the stage's action list for one step: `batch(i)` gives micro-batch i's tokens (the
   * first stage uses the inputs, the last the targets). Returns the compute spans.
   */
  async runStep(batch: (micro: number) => { inputs: Uint32Array; targets: Uint32Array }): Promise<StageSpan[]> {
    const spans: StageSpan[] = [];
    const free = this.slots.map((_, i) => i);
    const slotOf = new Map<number, number>();
    const sends: Promise<void>[] = [];
    const rt = this.rt;
    await rt.sync(); // zeroing the gradients is not part of the first forward span
    const { first, last, from, to } = this.range;
    // equal-cost stages: a span lasts at least `ms` from its start (the stage waits out the rest)
    const floor = (start: number, ms: number) => {
      const left = start + ms - nowMs();
      return left > 0 ? new Promise<void>((r) => setTimeout(r, left)) : Promise.resolve();
    };
    let pendingInput: Float32Array | null = null;
    let pendingGrad: Float32Array | null = null;
    let output: Float32Array | null = null; // the last compute's boundary tensor, on the host
    for (const a of this.actions) {
      try {
        switch (a.op) {
          case 'recv-act':
            pendingInput = await this.pg
              .recv(new Float32Array(this.boundary), a.peer, {
                tag: TAG_ACT,
                labels: { micro: a.micro, what: 'activation', stage: this.stage },
              })
              .wait();
            break;
          case 'recv-grad':
            pendingGrad = await this.pg
              .recv(new Float32Array(this.boundary), a.peer, {
                tag: TAG_GRAD,
                labels: { micro: a.micro, what: 'activation gradient', stage: this.stage },
              })
              .wait();
            break;
          case 'send-act':
            sends.push(
              this.pg.send(output!, a.peer, { tag: TAG_ACT, labels: { micro: a.micro, what: 'activation', stage: this.stage } }).wait(),
            );
            break;
          case 'send-grad':
            sends.push(
              this.pg
                .send(output!, a.peer, { tag: TAG_GRAD, labels: { micro: a.micro, what: 'activation gradient', stage: this.stage } })
                .wait(),
            );
            break;
          case 'forward': {
            const k = free.shift();
            if (k === undefined) throw new Error(`no free activation slot for micro-batch ${a.micro}`);
            slotOf.set(a.micro, k);
            const model = this.slots[k]!;
            const start = nowMs();
            const b = batch(a.micro);
            model.setBatch(b.inputs, b.targets);
            if (!first) rt.write(model.acts.resid[from]!, pendingInput!);
            await model.forward('train');
            // the span ends when the output is on the host, ready to send
            if (last) await rt.sync();
            else output = await rt.read(model.acts.resid[to]!);
            await floor(start, this.o.stageDelayMs);
            spans.push({ kind: 'forward', micro: a.micro, start, end: nowMs() });
            break;
          }
          case 'backward': {
            const k = slotOf.get(a.micro)!;
            const model = this.slots[k]!;
            const start = nowMs();
            if (!last) rt.write(model.scratch.dresid, pendingGrad!);
            await model.backward();
            if (first) await rt.sync();
            else output = await rt.read(model.scratch.dresid);
            await floor(start, 2 * this.o.stageDelayMs);
            spans.push({ kind: 'backward', micro: a.micro, start, end: nowMs() });
            slotOf.delete(a.micro);
            free.push(k);
            free.sort((x, y) => x - y);
            break;
          }
        }
      } catch (e) {
        throw this.named(e, a);
      }
    }
    await Promise.all(sends).catch((e) => {
      throw this.named(e);
    });
    return spans;
  }

  /**
   * A failure says which stage, rank and action, and where the lost peer sits: another pipeline
   * stage, the other end of the tied embedding, or (3D) a tensor-parallel shard or data-parallel
   * replica of this stage.
   */
  private named(e: unknown, a?: PipelineAction | string): Error {
    const msg = e instanceof Error ? e.message : String(e);
    if (msg.startsWith(`pipeline stage ${this.stage} (rank `)) return e as Error; // named already
    const where = typeof a === 'string' ? ` during ${a}` : a ? ` during ${a.op} of micro-batch ${a.micro}` : '';
    const peer = e instanceof CommError && e.peer !== undefined ? e.peer : undefined;
    const place = peer !== undefined ? this.peerPlace(peer) : null;
    return new Error(
      `pipeline stage ${this.stage} (rank ${this.pg.globalRank})${where}: ${msg}${place ? `; the peer is ${place} (rank ${peer})` : ''}`,
      { cause: e },
    );
  }

  private peerPlace(rank: number): string | null {
    if (this.group?.ranks.includes(rank)) return `pipeline stage ${this.group.ranks.indexOf(rank)}`;
    if (this.tpGroup?.ranks.includes(rank)) return `pipeline stage ${this.stage}, tensor-parallel rank ${this.tpGroup.ranks.indexOf(rank)}`;
    if (this.dpGroup?.ranks.includes(rank))
      return `pipeline stage ${this.stage}, data-parallel replica ${this.dpGroup.ranks.indexOf(rank)}`;
    if (this.embGroup?.ranks.includes(rank)) return `pipeline stage ${this.range.first ? this.p - 1 : 0} (the tied embedding's other end)`;
    return null;
  }

  /** Sum the two copies of wte's gradient; the global gradient norm; AdamW on this stage. Returns the norm. */
  async optimizerStep(lr: number): Promise<number> {
    try {
      return await this.optimizerStepUnnamed(lr);
    } catch (e) {
      throw this.named(e, 'the optimizer step');
    }
  }

  private async optimizerStepUnnamed(lr: number): Promise<number> {
    const rt = this.rt;
    if (this.embGroup) {
      const wte = this.params.get(WTE);
      const g = await rt.read(wte.grad);
      await this.embGroup.allReduce(g, { op: 'sum', labels: { what: 'tied wte gradient' } }).wait();
      rt.write(wte.grad, g);
    }
    if (this.zero) return this.zeroStep(lr);
    rt.run(this.normKernel);
    const sq = await rt.read(this.sumSq);
    if (this.tp && this.replicatedSq) {
      if (this.tp.group.size > 1) await this.tpg.allReduce(sq, { op: 'sum', labels: { tp: 1, what: 'gradient norm' } }).wait();
      const [replicated] = await rt.read(this.replicatedSq);
      sq[0] = Math.fround(sq[0]! + replicated!);
    }
    await this.pg.allReduce(sq, { op: 'sum', labels: { what: 'gradient norm' } }).wait();
    rt.write(this.opt!.gradSumSq, sq);
    this.opt!.recordStep(lr);
    await rt.sync(); // the update belongs to this step, not to the next micro-batch's forward span
    return Math.sqrt(sq[0]!);
  }

  /**
   * 3D's ZeRO-1 step (the tied wte gradient already summed): reduce-scatter the gradients over
   * the DP group (each replica receives the sum of its shard); the shard's squared norm split into
   * TP-sharded and replicated parameters (the last stage's wte copy left out), summed over the DP
   * shards, the sharded part over the TP group, then over the stages; AdamW on the own shard; the
   * updated weights all-gathered over the DP group.
   */
  private async zeroStep(lr: number): Promise<number> {
    const rt = this.rt;
    const z = this.zero!;
    const dp = this.dpGroup;
    if (!dp) throw new Error('pipeline stage: attach() the data-parallel group first');
    const store = this.params;
    const flatGrads = viewOf(store.refs[0]!.grad, 'grads(all)', 0, store.flatElems);
    const flatParams = viewOf(store.refs[0]!.param, 'params(all)', 0, store.flatElems);
    const a = z.bounds[z.rank]!;
    const b = z.bounds[z.rank + 1]!;
    const shard = await dp
      .reduceScatter(await rt.read(flatGrads), { op: 'sum', counts: z.counts, labels: { what: 'gradients', dp: 1 } })
      .wait();
    if (shard.length > 0) rt.write(flatGrads, shard, a);
    let sharded = 0;
    let replicated = 0;
    const skipWte = this.range.last && !this.range.first;
    for (const r of store.refs) {
      if (r.name === WTE && skipWte) continue;
      const lo = Math.max(a, r.offset);
      const hi = Math.min(b, r.offset + r.numel);
      let s = 0;
      for (let i = lo; i < hi; i++) s += shard[i - a]! * shard[i - a]!;
      if (this.tp && shardKind(r.name) !== 'replicated') sharded += s;
      else replicated += s;
    }
    const sums = Float32Array.of(sharded, replicated);
    await dp.allReduce(sums, { op: 'sum', labels: { what: 'gradient norm', dp: 1 } }).wait();
    const sq = Float32Array.of(sums[0]!);
    if (this.tp && this.tp.group.size > 1) await this.tpg.allReduce(sq, { op: 'sum', labels: { tp: 1, what: 'gradient norm' } }).wait();
    sq[0] = Math.fround(sq[0]! + sums[1]!);
    await this.pg.allReduce(sq, { op: 'sum', labels: { what: 'gradient norm' } }).wait();
    rt.write(z.opt.gradSumSq, sq);
    z.opt.recordStep(lr);
    const own = b > a ? await rt.read(flatParams, b - a, a) : new Float32Array(0);
    rt.write(flatParams, await dp.allGather(own, { counts: z.counts, labels: { what: 'weights', dp: 1 } }).wait());
    await rt.sync();
    return Math.sqrt(sq[0]!);
  }

  /** The whole stage's AdamW moments by name (ZeRO-1: all-gathered over the DP group, a collective). */
  private async optimizerMoments(): Promise<{ m: Map<string, Float32Array>; v: Map<string, Float32Array> }> {
    if (!this.zero) return this.opt!.readState();
    const z = this.zero;
    const shard = await z.opt.readShard();
    const m = await this.dpGroup!.allGather(shard.m, { counts: z.counts, labels: { what: 'checkpoint exp_avg', dp: 1 } }).wait();
    const v = await this.dpGroup!.allGather(shard.v, { counts: z.counts, labels: { what: 'checkpoint exp_avg_sq', dp: 1 } }).wait();
    const split = (flat: Float32Array) => new Map(this.params.refs.map((r) => [r.name, flat.slice(r.offset, r.offset + r.numel)]));
    return { m: split(m), v: split(v) };
  }

  private get optimizerStepCount(): number {
    return this.zero ? this.zero.opt.step : this.opt!.step;
  }

  /** The step's loss (the last stage's sum over its slots; 0 elsewhere). */
  async readLoss(): Promise<number> {
    if (!this.range.last) return 0;
    let s = 0;
    for (const m of this.slots) s += await m.readLoss();
    return s;
  }

  /** Mean loss of one batch through the pipeline (slot 0, forward only); the last stage returns it, others null. */
  async evalBatch(b: { inputs: Uint32Array; targets: Uint32Array }): Promise<number | null> {
    const model = this.slots[0]!;
    const { first, last, from, to } = this.range;
    model.setBatch(b.inputs, b.targets);
    if (!first)
      model.rt.write(
        model.acts.resid[from]!,
        await this.pg.recv(new Float32Array(this.boundary), this.stage - 1, { tag: TAG_EVAL }).wait(),
      );
    await model.forward('eval');
    if (!last) {
      await this.pg.send(await this.rt.read(model.acts.resid[to]!), this.stage + 1, { tag: TAG_EVAL }).wait();
      return null;
    }
    const losses = await model.readLosses();
    let s = 0;
    for (const x of losses) s += x;
    return s / losses.length;
  }

  /**
   * The whole model's weights and AdamW state on rank 0 (collective: every stage sends its
   * parameters, wte once); null on the other ranks.
   */
  async gather(): Promise<{ params: Map<string, Float32Array>; state: OptimizerState } | null> {
    let own = await this.params.readParams();
    let st = await this.optimizerMoments();
    // 3D: DP replica 0 gathers (the replicas hold the same weights)
    if (this.zero && this.zero.rank !== 0) return null;
    if (this.tp) {
      // whole tensors of the stage from its TP shards; TP rank 0 takes part in the pipeline gather
      own = await this.unshard(own);
      st = { m: await this.unshard(st.m), v: await this.unshard(st.v) };
      if (this.tp.group.rank !== 0) return null;
    }
    const ranges = this.ranges;
    const numel = new Map(paramSpecs(this.config).map((s) => [s.name, s.shape.reduce((a, b) => a * b, 1)]));
    const pack = (names: string[]) => {
      const total = names.reduce((s, n) => s + numel.get(n)!, 0);
      const flat = new Float32Array(3 * total);
      let off = 0;
      for (const src of [own, st.m, st.v])
        for (const n of names) {
          flat.set(src.get(n)!, off);
          off += numel.get(n)!;
        }
      return flat;
    };
    const unpack = (names: string[], flat: Float32Array, into: Map<string, Float32Array>[]) => {
      let off = 0;
      for (const dst of into)
        for (const n of names) {
          dst.set(n, flat.slice(off, off + numel.get(n)!));
          off += numel.get(n)!;
        }
    };
    if (this.stage !== 0) {
      await this.pg.send(pack(checkpointNames(this.config, this.range)), 0, { tag: TAG_CKPT, labels: { what: 'checkpoint' } }).wait();
      return null;
    }
    const params = new Map<string, Float32Array>();
    const m = new Map<string, Float32Array>();
    const v = new Map<string, Float32Array>();
    unpack(checkpointNames(this.config, this.range), pack(checkpointNames(this.config, this.range)), [params, m, v]);
    for (let s = 1; s < this.p; s++) {
      const names = checkpointNames(this.config, ranges[s]!);
      const size = 3 * names.reduce((a, n) => a + numel.get(n)!, 0);
      unpack(names, await this.pg.recv(new Float32Array(size), s, { tag: TAG_CKPT }).wait(), [params, m, v]);
    }
    // forward order, as the single-device checkpoint writes them
    const order = paramSpecs(this.config).map((s) => s.name);
    const sorted = (x: Map<string, Float32Array>) => new Map(order.map((n) => [n, x.get(n)!]));
    return { params: sorted(params), state: { m: sorted(m), v: sorted(v), step: this.optimizerStepCount } };
  }

  /** 3D: this stage's whole tensors from the TP group's shards (collective over the TP group). */
  private async unshard(local: Map<string, Float32Array>): Promise<Map<string, Float32Array>> {
    const g = this.tpg;
    const refs = this.params.refs;
    const per = refs.reduce((s, r) => s + r.numel, 0);
    const flat = new Float32Array(per);
    let o = 0;
    for (const r of refs) {
      flat.set(local.get(r.name)!, o);
      o += r.numel;
    }
    const all =
      g.size > 1 ? await g.allGather(flat, { output: new Float32Array(per * g.size), labels: { tp: 1, what: 'checkpoint' } }).wait() : flat;
    const specs = new Map(paramSpecs(this.config).map((s) => [s.name, s]));
    const out = new Map<string, Float32Array>();
    o = 0;
    for (const r of refs) {
      const shards = Array.from({ length: g.size }, (_, k) => all.subarray(k * per + o, k * per + o + r.numel));
      out.set(r.name, unshardTensor(specs.get(r.name)!, shards, g.size));
      o += r.numel;
    }
    return out;
  }

  /** Continue from a checkpoint of the whole model: each stage takes its parameters and moments (3D: its TP shards). */
  load(params: Map<string, Float32Array>, state: OptimizerState | null) {
    const shard = (m: Map<string, Float32Array>) => (this.tp ? shardModel(this.config, m, this.tp.group.size, this.tp.group.rank) : m);
    this.params.writeParams(shard(params));
    if (!state) return;
    if (this.zero) {
      const flat = (m: Map<string, Float32Array>) => {
        const out = new Float32Array(this.params.flatElems);
        for (const r of this.params.refs) out.set(m.get(r.name)!, r.offset);
        return out.subarray(this.zero!.bounds[this.zero!.rank]!, this.zero!.bounds[this.zero!.rank + 1]!);
      };
      this.zero.opt.writeShard(flat(shard(state.m)), flat(shard(state.v)), state.step);
    } else this.opt!.writeState({ m: shard(state.m), v: shard(state.v) }, state.step);
  }
}
