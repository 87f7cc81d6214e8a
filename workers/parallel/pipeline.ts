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
// equals the single-device model. The optimizer (with the global gradient norm, and 3D's ZeRO-1)
// is the pipeline engine's (workers/train/pipeline-engine.ts), not the stage's.
//
// 3D: with a tensor-parallel group the slots hold this rank's shards of the stage (Megatron's
// tensor-parallel layers inside a pipeline stage); the boundary tensor is the full resid, the
// same on every TP rank, sent between ranks of equal TP rank.
//
// Mixed precision (bf16, fp16): the stage computes at 16 bits (its optimizer keeps the fp32 master);
// the boundary tensors and the tied wte's gradient travel as their 16-bit bits (precision/tensor-wire.ts),
// half of fp32's bytes; fp16's loss scale seeds the last stage's backward (setLossScale).
import type { ProcessGroup, Tensor, WorldGroup } from '../comm/index.js';
import { CommError, nowMs } from '../comm/index.js';
import type { StoragePrecision } from '../gpu/precision.js';
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import { Gpt } from '../model/gpt.js';
import { type StageRange, stageOwns } from '../model/stage.js';
import { tpParamSpecs, vocabAlign } from '../model/tp-layout.js';
import { ParamStore } from '../model/params.js';
import { allReduceTensor, readForWire, wireBufferFor, wireDtype } from '../precision/tensor-wire.js';
import { maxInFlight, partitionLayers, type PipelineAction, type PipelineSchedule, stageActions } from './pipeline-schedule.js';
import { type GroupPlace, GroupTpOps } from './tensor-parallel.js';

// tags on the pipeline group (the whole-model checkpoint uses 3: pipeline-checkpoint.ts)
const TAG_ACT = 1;
const TAG_GRAD = 2;
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
  const sizes = new Map(paramSpecs(config).map((s) => [s.name, s.shape.reduce((a, b) => a * b, 1)]));
  const numel = (n: string) => sizes.get(n)!;
  const block = [...sizes].filter(([n]) => n.startsWith('transformer.h.0.')).reduce((s, [, k]) => s + k, 0);
  const emb = numel(WTE) + numel('transformer.wpe.weight');
  const head = numel(WTE) + numel('transformer.ln_f.weight') + numel('transformer.ln_f.bias');
  return partitionLayers(config.n_layer, p, block, emb, head).map((r, s) => ({ ...r, first: s === 0, last: s === p - 1 }));
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
  /** storage of the weights, gradients and activations (default fp32) */
  precision?: StoragePrecision;
}

/** 3D: the stage is split over a tensor-parallel group. */
export interface StageTensorParallel {
  /** the group, or the rank's place in it until attach() */
  group: ProcessGroup | GroupPlace;
  partitionActivations?: boolean;
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
  /** 3D: the data-parallel group (only to name a lost peer) */
  private dpGroup: ProcessGroup | null = null;
  private embGroup: ProcessGroup | null = null;
  /** the shape and precision of the tensors sent between stages */
  private readonly boundary: GpuTensor;
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
    /** 3D: this stage's tensor-parallel group */
    readonly tp: StageTensorParallel | null = null,
  ) {
    this.p = pg.size;
    this.stage = pg.rank;
    this.group = 'allReduce' in pg ? pg : null;
    this.ranges = stageRanges(config, this.p, o.partition);
    this.range = this.ranges[this.stage]!;
    const precision = o.precision ?? 'fp32';
    this.params = new ParamStore(rt, config, {
      specs: tpParamSpecs(config, tp?.group.size ?? 1, vocabAlign(precision)),
      owns: (n) => stageOwns(this.range, n),
      precision,
    });
    this.actions = stageActions(o.schedule, this.p, this.stage, o.m);
    const nSlots = maxInFlight(this.actions);
    const base = { B: o.B, T: o.T, checkpointing: o.checkpointing, lossScale: o.lossScale, stage: this.range, precision };
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
    this.boundary = first.scratch.dresid; // (B, T, C) at the stage's precision, as every boundary tensor
  }

  /** fp16: the next step's backward is seeded with dloss x scale (the last stage's cross-entropy) */
  setLossScale(scale: number) {
    for (const s of this.slots) s.setLossScale(scale);
  }

  /** The pipeline group (and 3D's tensor-parallel and data-parallel groups) of a stage built from its place only. */
  attach(pp: ProcessGroup, tp?: ProcessGroup, dp?: ProcessGroup) {
    this.dpGroup = dp ?? null;
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
      const data = await readForWire(this.rt, wte.param);
      await this.embGroup.broadcast(data, { root: 0, dtype: wireDtype(wte.param), labels: { what: 'tied wte' } }).wait();
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
    const p2p = (tag: number, micro: number) => ({
      tag,
      dtype: wireDtype(this.boundary),
      labels: { micro, what: tag === TAG_ACT ? 'activation' : 'activation gradient', stage: this.stage },
    });
    let pendingInput: Tensor | null = null;
    let pendingGrad: Tensor | null = null;
    let output: Tensor | null = null; // the last compute's boundary tensor, on the host
    for (const a of this.actions) {
      try {
        switch (a.op) {
          case 'recv-act':
            pendingInput = await this.pg.recv(wireBufferFor(this.boundary), a.peer, p2p(TAG_ACT, a.micro)).wait();
            break;
          case 'recv-grad':
            pendingGrad = await this.pg.recv(wireBufferFor(this.boundary), a.peer, p2p(TAG_GRAD, a.micro)).wait();
            break;
          case 'send-act':
          case 'send-grad':
            sends.push(this.pg.send(output!, a.peer, p2p(a.op === 'send-act' ? TAG_ACT : TAG_GRAD, a.micro)).wait());
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
            else output = await readForWire(rt, model.acts.resid[to]!);
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
            else output = await readForWire(rt, model.scratch.dresid);
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
  named(e: unknown, a?: PipelineAction | string): Error {
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

  /** Sum the two copies of wte's gradient over the embedding group (both copies then take the same update). */
  async syncTiedEmbedding(): Promise<void> {
    if (!this.embGroup) return;
    // the vocabulary's rows only (3d: of this TP rank's shard): the padding rows' gradients are zero
    const wte = this.params.get(WTE);
    const [Vl, C] = wte.shape as [number, number];
    const rows = Math.max(0, Math.min(Vl, this.config.vocab_size - (this.tpOps?.rank ?? 0) * Vl));
    await allReduceTensor(this.rt, this.embGroup, wte.grad, { labels: { what: 'tied wte gradient' }, numel: rows * C });
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
    const p2p = { tag: TAG_EVAL, dtype: wireDtype(this.boundary) };
    if (!first) model.rt.write(model.acts.resid[from]!, await this.pg.recv(wireBufferFor(this.boundary), this.stage - 1, p2p).wait());
    await model.forward('eval');
    if (!last) {
      await this.pg.send(await readForWire(this.rt, model.acts.resid[to]!), this.stage + 1, p2p).wait();
      return null;
    }
    const losses = await model.readLosses();
    let s = 0;
    for (const x of losses) s += x;
    return s / losses.length;
  }
}
