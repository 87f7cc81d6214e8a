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
import type { ProcessGroup, WorldGroup } from '../comm/index.js';
import { CommError, nowMs } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import { viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { sumSquares } from '../kernels/reduce.js';
import type { StageRange } from '../model/activations.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import { Gpt } from '../model/gpt.js';
import { ParamStore, slotElems } from '../model/params.js';
import { AdamW, type AdamwConfig } from '../optim/adamw.js';
import { maxInFlight, partitionLayers, type PipelineAction, type PipelineSchedule, stageActions } from './pipeline-schedule.js';
import type { OptimizerState } from './strategy.js';

const TAG_ACT = 1;
const TAG_GRAD = 2;
const TAG_CKPT = 3;
const TAG_EVAL = 4;
const WTE = 'transformer.wte.weight';

/** The stage ranges of a model split over p stages (balanced by parameter count). */
export function stageRanges(config: GptConfig, p: number): StageRange[] {
  const numel = (n: string) => paramSpecs(config).find((s) => s.name === n)!.shape.reduce((a, b) => a * b, 1);
  const block = paramSpecs(config).filter((s) => s.name.startsWith('transformer.h.0.')).reduce((s, x) => s + x.shape.reduce((a, b) => a * b, 1), 0);
  const emb = numel(WTE) + numel('transformer.wpe.weight');
  const head = numel(WTE) + numel('transformer.ln_f.weight') + numel('transformer.ln_f.bias');
  return partitionLayers(config.n_layer, p, block, emb, head).map((r, s) => ({ ...r, first: s === 0, last: s === p - 1 }));
}

/** Which parameters a stage keeps (the last stage keeps its own copy of the tied wte). */
export function stageOwns(r: StageRange): (name: string) => boolean {
  return (name) => {
    if (name === WTE) return r.first || r.last;
    if (name === 'transformer.wpe.weight') return r.first;
    if (name.startsWith('transformer.ln_f.')) return r.last;
    const m = /^transformer\.h\.(\d+)\./.exec(name);
    return m !== null && Number(m[1]) >= r.from && Number(m[1]) < r.to;
  };
}

/** Parameters a stage contributes to the whole model's checkpoint (wte once: from the first stage). */
function checkpointNames(config: GptConfig, r: StageRange): string[] {
  const owns = stageOwns(r);
  return paramSpecs(config)
    .map((s) => s.name)
    .filter((n) => owns(n) && !(n === WTE && !r.first));
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
  readonly params: ParamStore;
  readonly slots: Gpt[];
  readonly actions: PipelineAction[];
  readonly opt: AdamW;
  private readonly sumSq: GpuTensor;
  private readonly normKernel: Dispatch[];
  private embGroup: ProcessGroup | null = null;
  private readonly boundary: number;

  constructor(
    private readonly rt: Runtime,
    readonly config: GptConfig,
    /** the pipeline group: stage = group rank (the world for --strategy pp; one PP group of the 3D grid) */
    private readonly pg: ProcessGroup,
    private readonly o: PipelineOptions,
    adamw: AdamwConfig,
  ) {
    this.p = pg.size;
    this.stage = pg.rank;
    this.range = stageRanges(config, this.p)[this.stage]!;
    this.params = new ParamStore(rt, config, undefined, false, undefined, stageOwns(this.range));
    this.actions = stageActions(o.schedule, this.p, this.stage, o.m);
    const nSlots = maxInFlight(this.actions);
    const first = new Gpt(rt, config, { B: o.B, T: o.T, checkpointing: o.checkpointing, lossScale: o.lossScale, params: this.params, stage: this.range, actsPrefix: 'slot0.' });
    this.slots = [first];
    for (let k = 1; k < nSlots; k++) {
      this.slots.push(new Gpt(rt, config, { B: o.B, T: o.T, checkpointing: o.checkpointing, lossScale: o.lossScale, params: this.params, stage: this.range, scratch: first.scratch!, actsPrefix: `slot${k}.` }));
    }
    this.boundary = o.B * o.T * config.d_model;
    this.opt = new AdamW(rt, this.params, adamw);
    // the squared norm of this stage's gradients, leaving out the last stage's wte copy
    const skip = this.range.last && !this.range.first ? slotElems(this.params.get(WTE).numel) : 0;
    this.sumSq = rt.allocator.tensor('pp.grad_norm_sq', 'workspace', [1]);
    const grads = this.params.refs[0]!.grad;
    this.normKernel = sumSquares(rt, { out: this.sumSq, inp: viewOf(grads, 'grads(stage norm)', skip, this.params.flatElems - skip), n: this.params.flatElems - skip });
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
            pendingInput = await this.pg.recv(new Float32Array(this.boundary), a.peer, { tag: TAG_ACT, labels: { micro: a.micro, what: 'activation', stage: this.stage } }).wait();
            break;
          case 'recv-grad':
            pendingGrad = await this.pg.recv(new Float32Array(this.boundary), a.peer, { tag: TAG_GRAD, labels: { micro: a.micro, what: 'activation gradient', stage: this.stage } }).wait();
            break;
          case 'send-act':
            sends.push(this.pg.send(output!, a.peer, { tag: TAG_ACT, labels: { micro: a.micro, what: 'activation', stage: this.stage } }).wait());
            break;
          case 'send-grad':
            sends.push(this.pg.send(output!, a.peer, { tag: TAG_GRAD, labels: { micro: a.micro, what: 'activation gradient', stage: this.stage } }).wait());
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
            if (!last) rt.write(model.scratch!.dresid, pendingGrad!);
            await model.backward();
            if (first) await rt.sync();
            else output = await rt.read(model.scratch!.dresid);
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

  /** A failure says which stage, rank and action, and which stage the lost peer was. */
  private named(e: unknown, a?: PipelineAction): Error {
    const msg = e instanceof Error ? e.message : String(e);
    const where = a ? ` during ${a.op} of micro-batch ${a.micro}` : '';
    const peer = e instanceof CommError && e.peer !== undefined && this.pg.ranks.includes(e.peer) ? `; the peer is pipeline stage ${this.pg.ranks.indexOf(e.peer)} (rank ${e.peer})` : '';
    return new Error(`pipeline stage ${this.stage} (rank ${this.pg.globalRank})${where}: ${msg}${peer}`, { cause: e });
  }

  /** Sum the two copies of wte's gradient; the global gradient norm; AdamW on this stage. Returns the norm. */
  async optimizerStep(lr: number): Promise<number> {
    const rt = this.rt;
    if (this.embGroup) {
      const wte = this.params.get(WTE);
      const g = await rt.read(wte.grad);
      await this.embGroup.allReduce(g, { op: 'sum', labels: { what: 'tied wte gradient' } }).wait();
      rt.write(wte.grad, g);
    }
    rt.run(this.normKernel);
    const sq = await rt.read(this.sumSq);
    await this.pg.allReduce(sq, { op: 'sum', labels: { what: 'gradient norm' } }).wait();
    rt.write(this.opt.gradSumSq, sq);
    this.opt.recordStep(lr);
    await rt.sync(); // the update belongs to this step, not to the next micro-batch's forward span
    return Math.sqrt(sq[0]!);
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
    if (!first) model.rt.write(model.acts.resid[from]!, await this.pg.recv(new Float32Array(this.boundary), this.stage - 1, { tag: TAG_EVAL }).wait());
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
    const own = await this.params.readParams();
    const st = await this.opt.readState();
    const ranges = stageRanges(this.config, this.p);
    const numel = new Map(paramSpecs(this.config).map((s) => [s.name, s.shape.reduce((a, b) => a * b, 1)]));
    const pack = (names: string[]) => {
      const total = names.reduce((s, n) => s + numel.get(n)!, 0);
      const flat = new Float32Array(3 * total);
      let off = 0;
      for (const src of [own, st.m, st.v]) for (const n of names) {
        flat.set(src.get(n)!, off);
        off += numel.get(n)!;
      }
      return flat;
    };
    const unpack = (names: string[], flat: Float32Array, into: Map<string, Float32Array>[]) => {
      let off = 0;
      for (const dst of into) for (const n of names) {
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
    return { params: sorted(params), state: { m: sorted(m), v: sorted(v), step: this.opt.step } };
  }

  /** Continue from a checkpoint of the whole model: each stage takes its parameters and moments. */
  load(params: Map<string, Float32Array>, state: OptimizerState | null) {
    this.params.writeParams(params);
    if (state) this.opt.writeState(state, state.step);
  }
}
