// GPT-2 as nanoGPT writes it: token + learned position embeddings, L pre-layernorm blocks
// (causal self-attention, GELU-tanh MLP), final layernorm, LM head tied to wte; split inside
// each layer over a tensor-parallel group as Megatron-LM does (layout in tp-layout.ts, the
// linears in linear.ts), and into pipeline stages (stage.ts). The model records prepared kernel
// launches and never talks to the network: the group's collectives are injected
// (TensorParallelOps), and strategies wrap the model through the layer hooks and the
// gradient-ready event. With one rank (the default) it records no collective at all.
//
//   embedding: resid[0] = g(wte[idx] of own vocabulary rows + wpe)
//   block l, x = resid[l] (B,T,C), local heads NH/TP:
//     ln1 = LN(x); qkv = f(ln1) @ Wattn_r^T + b_r (B,T,3C/TP); atty = attention(qkv) (B,T,C/TP)
//     res2 = x + g(atty @ Wproj_r^T) + b
//     ln2 = LN(res2); fch = f(ln2) @ Wfc_r^T + b_r (B,T,4C/TP); y = res2 + g(gelu(fch) @ Wfcproj_r^T) + b = resid[l+1]
//   head: lnf = LN(resid[L]); logits_r = f(lnf) @ wte_r^T (B,T,V/TP), never gathered;
//     vocab-parallel cross-entropy; loss = mean over the global batch
// f: identity forward, all-reduce backward; g: all-reduce forward, identity backward.
//
// Mixed precision (precision bf16 or fp16): the weights, gradients and activations the kernels
// compute with are 16-bit (the kernels widen them to f32 and accumulate in f32); the vocabulary
// is padded to a multiple of 4 (tp-layout.ts vocabAlign): the padding rows of wte are 0 and stay 0,
// and the cross-entropy masks their logits out of the softmax (their gradient is 0), so the loss is
// the same function of the real vocabulary. fp16's loss scale multiplies the loss's gradient
// (setLossScale), never the loss itself.
import type { GpuTensor } from '../gpu/allocator.js';
import type { StoragePrecision } from '../gpu/precision.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { attentionBackward, attentionForward } from '../kernels/attention.js';
import { geluBackward, geluForward } from '../kernels/gelu.js';
import { layernormBackward, layernormForward } from '../kernels/layernorm.js';
import { sum } from '../kernels/reduce.js';
import { addInPlace } from '../kernels/residual.js';
import { type Activations, allocateActivations, allocateScratch, type Scratch } from './activations.js';
import { type GptConfig, validateGptConfig } from './config.js';
import { columnParallelLinear, rowParallelLinear } from './linear.js';
import { type ParamRef, ParamStore } from './params.js';
import { type StageRange, stageOwns, validateStage, wholeModel } from './stage.js';
import { SingleRankTpOps, type TensorParallelOps, type TensorParallelOptions, type TpLabels } from './tensor-parallel.js';
import { tpParamSpecs, validateTensorParallel, vocabAlign } from './tp-layout.js';
import { vocabParallelCrossEntropy, vocabParallelEmbedding } from './vocab-parallel.js';
import { type LayerCommands, type Pass, CommandList } from './command-list.js';

export interface LayerInfo {
  /** 0 = embedding, 1..L = blocks, L+1 = head */
  index: number;
  name: string;
  /** parameters this layer owns (their gradients are complete after its backward) */
  params: ParamRef[];
}

type MaybeAsync = void | Promise<void>;

/** Hooks strategies attach to (DDP buckets, ZeRO-3 gather/free, telemetry spans). */
export interface ModelHooks {
  beforeForward?(layer: LayerInfo): MaybeAsync;
  afterForward?(layer: LayerInfo): MaybeAsync;
  beforeBackward?(layer: LayerInfo): MaybeAsync;
  afterBackward?(layer: LayerInfo): MaybeAsync;
  /** a parameter's gradient for this micro-batch is fully recorded; fired in backward order */
  gradReady?(p: ParamRef): MaybeAsync;
}

export interface GptOptions {
  /** micro-batch rows */
  B: number;
  /** sequence length, at most block_size */
  T: number;
  /** recompute each block's internals in backward, keeping only block inputs */
  checkpointing?: boolean;
  /** gradient scale of each token's loss: 1 / (tokens in the global batch) so data-parallel splits sum to the global mean */
  lossScale?: number;
  /** share parameters with another instance (an eval model of another batch size, pipeline slots); built from tpParamSpecs + stageOwns */
  params?: ParamStore;
  /**
   * pipeline stage: only blocks [from, to), plus the embedding on the first stage and ln_f + the
   * LM head on the last (which reads its own copy of wte). A stage's input is acts.resid[from]
   * (written by the pipeline before forward; the same on every rank of a TP group); backward
   * expects dL/d resid[to] in scratch.dresid (except on the last stage) and leaves dL/d resid[from] there.
   */
  stage?: StageRange;
  /** share the backward scratch with another instance (pipeline activation slots run one at a time) */
  scratch?: Scratch;
  /** name prefix of this instance's activation buffers (pipeline slots) */
  actsPrefix?: string;
  /** tensor parallelism: this rank's group (default: a group of one) */
  tp?: TensorParallelOptions;
  /** storage of the compute tensors: fp32 (default), or mixed precision's bf16 / fp16 (`params` must match) */
  precision?: StoragePrecision;
}

/** The head's prepared work: one forward per mode (training also writes dlogits and the loss). */
interface HeadCommands {
  /** training's forward at a loss scale (the cross-entropy seeds backward with dloss x scale), prepared once per scale */
  train(scale: number): CommandList;
  eval: CommandList;
  backward: CommandList;
}

export class Gpt {
  readonly config: GptConfig;
  readonly params: ParamStore;
  readonly acts: Activations;
  readonly scratch: Scratch;
  /** this instance's layers in forward order (a pipeline stage holds only its own) */
  readonly layers: LayerInfo[];
  readonly B: number;
  readonly T: number;
  readonly checkpointing: boolean;
  /** checkpointed block inputs kept as this rank's 1/TP slice, all-gathered before recomputation */
  readonly partitioned: boolean;
  readonly lossScale: number;
  /** the share of the model this instance computes (everything unless it is a pipeline stage) */
  readonly stage: StageRange;
  readonly tp: TensorParallelOps;
  readonly precision: StoragePrecision;
  /** the loss scale the next backward is seeded with (fp16; 1 otherwise) */
  private lossScaleFactor = 1;
  hooks: ModelHooks = {};
  /** the micro-batch's scaled loss sum (1), and the step's accumulated loss (1) */
  readonly lossMicro: GpuTensor;
  readonly lossAcc: GpuTensor;

  private readonly embedding: LayerCommands | null = null;
  private readonly blocks: LayerCommands[] = [];
  private readonly head: HeadCommands | null = null;
  private readonly lossAccumulate: Dispatch[];

  constructor(
    readonly rt: Runtime,
    config: GptConfig,
    opts: GptOptions,
  ) {
    this.config = validateGptConfig(config);
    const { B, T } = opts;
    if (!Number.isInteger(B) || B < 1) throw new Error(`batch rows must be a positive integer, got ${B}`);
    if (!Number.isInteger(T) || T < 1 || T > config.block_size)
      throw new Error(`sequence length ${T} must be between 1 and block_size ${config.block_size}`);
    const tp = (this.tp = opts.tp?.ops ?? new SingleRankTpOps(rt));
    const TP = tp.size;
    validateTensorParallel(config, TP);
    const L = config.n_layer;
    const stage = (this.stage = validateStage(opts.stage ?? wholeModel(L), L));
    this.B = B;
    this.T = T;
    this.checkpointing = opts.checkpointing ?? false;
    this.partitioned = this.checkpointing && TP > 1 && (opts.tp?.partitionActivations ?? true);
    this.lossScale = opts.lossScale ?? 1 / (B * T);
    const precision = (this.precision = opts.precision ?? 'fp32');
    const specs = tpParamSpecs(config, TP, vocabAlign(precision));
    this.params = opts.params ?? new ParamStore(rt, config, { specs, owns: (name) => stageOwns(stage, name), precision });
    if (this.params.precision !== precision)
      throw new Error(`the shared parameter store holds ${this.params.precision} weights but this model computes in ${precision}`);
    const place = { size: TP, rank: tp.rank, partitioned: this.partitioned };
    this.acts = allocateActivations(rt, config, B, T, this.checkpointing, stage, place, opts.actsPrefix, precision);
    this.scratch = opts.scratch ?? allocateScratch(rt, config, B, T, TP, precision);
    this.lossMicro = rt.allocator.tensor('loss.micro', 'workspace', [1]);
    this.lossAcc = rt.allocator.tensor('loss.step', 'workspace', [1]);

    const { from, to, first, last } = stage;
    const p = (n: string) => this.params.get(n);
    const blockRange = Array.from({ length: to - from }, (_, i) => from + i);
    // a pipeline's last stage owns its copy of the tied wte (its gradient is summed with the first stage's)
    const headParams = () => [...(first ? [] : [p('transformer.wte.weight')]), p('transformer.ln_f.weight'), p('transformer.ln_f.bias')];
    this.layers = [
      ...(first ? [{ index: 0, name: 'embedding', params: [p('transformer.wte.weight'), p('transformer.wpe.weight')] }] : []),
      ...blockRange.map((l) => ({
        index: l + 1,
        name: `block.${l}`,
        params: this.params.refs.filter((r) => r.name.startsWith(`transformer.h.${l}.`)),
      })),
      ...(last ? [{ index: L + 1, name: 'head', params: headParams() }] : []),
    ];

    const C = config.d_model;
    const a = this.acts;
    const s = this.scratch;
    if (first) {
      const [wte, wpe] = [p('transformer.wte.weight'), p('transformer.wpe.weight')];
      this.embedding = vocabParallelEmbedding(rt, tp, { out: a.resid[0]!, dout: s.dresid, idx: a.idx, wte, wpe, B, T, C });
    }
    for (const l of blockRange) this.blocks[l] = this.prepareBlock(l);
    this.lossAccumulate = addInPlace(rt, { dst: this.lossAcc, src: this.lossMicro, n: 1 });
    if (last) this.head = this.prepareHead();
  }

  private prepareBlock(l: number): LayerCommands {
    const { rt, tp } = this;
    const C = this.config.d_model;
    const Cl = C / tp.size; // own heads' columns
    const NHl = this.config.n_head / tp.size;
    const { B, T } = this;
    const N = B * T;
    const x = this.acts.resid[l]!;
    const y = this.acts.resid[l + 1]!;
    const b = this.acts.blocks[l]!;
    const s = this.scratch;
    const w = (n: string) => this.params.get(`transformer.h.${l}.${n}`);
    const [ln1w, ln1b, ln2w, ln2b] = [w('ln_1.weight'), w('ln_1.bias'), w('ln_2.weight'), w('ln_2.bias')];
    const layer = `block.${l}`;
    const attn = { layer, half: 'attn' };
    const mlp = { layer, half: 'mlp' };
    const wb = (n: string) => ({ w: w(`${n}.weight`), b: w(`${n}.bias`) });
    // a column-parallel linear reads a layernorm's output (its input gradient goes to s.dln); a
    // row-parallel one adds onto the residual stream (its output gradient is s.dresid)
    type Col = { x: GpuTensor; y: GpuTensor; dy: GpuTensor; OC: number };
    type Row = { x: GpuTensor; y: GpuTensor; res: GpuTensor; dx: GpuTensor; C: number };
    const col = (n: string, a: Col, labels: TpLabels) => columnParallelLinear(rt, tp, { ...a, dx: s.dln, ...wb(n), N, C, labels });
    const row = (n: string, a: Row, labels: TpLabels) =>
      rowParallelLinear(rt, tp, { ...a, partial: s.partial, dy: s.dresid, ...wb(n), N, OC: C, labels });
    const qkv = col('attn.c_attn', { x: b.ln1, y: b.qkv, dy: s.dqkv, OC: 3 * Cl }, attn);
    const proj = row('attn.c_proj', { x: b.atty, y: b.res2, res: x, dx: s.datty, C: Cl }, attn);
    const fc = col('mlp.c_fc', { x: b.ln2, y: b.fch, dy: s.dfch, OC: 4 * Cl }, mlp);
    const fcproj = row('mlp.c_proj', { x: b.fchGelu, y, res: b.res2, dx: s.dfch, C: 4 * Cl }, mlp);
    const lnBackward = (lnw: ParamRef, lnb: ParamRef, inp: GpuTensor, mean: GpuTensor, rstd: GpuTensor) =>
      layernormBackward(rt, { dinp: s.dresid, dweight: lnw.grad, dbias: lnb.grad, dout: s.dln, inp, weight: lnw.param, mean, rstd, N, C });

    const forward = new CommandList()
      .append(proj.init)
      .run(layernormForward(rt, { out: b.ln1, mean: b.ln1Mean, rstd: b.ln1Rstd, inp: x, weight: ln1w.param, bias: ln1b.param, N, C }))
      .append(qkv.forward)
      .run(attentionForward(rt, { out: b.atty, att: b.att, qkv: b.qkv, B, T, C: Cl, NH: NHl }))
      .append(proj.forward)
      .run(layernormForward(rt, { out: b.ln2, mean: b.ln2Mean, rstd: b.ln2Rstd, inp: b.res2, weight: ln2w.param, bias: ln2b.param, N, C }))
      .append(fc.forward)
      .run(geluForward(rt, { out: b.fchGelu, inp: b.fch, n: N * 4 * Cl }))
      .append(fcproj.init)
      .append(fcproj.forward);
    // dresid holds dL/dy on entry and dL/dx on exit (each layernorm's backward adds onto it)
    const backward = new CommandList()
      .append(fcproj.backward)
      .run(geluBackward(rt, { dinp: s.dfch, inp: b.fch, dout: s.dfch, n: N * 4 * Cl }))
      .append(fc.backward)
      .run(lnBackward(ln2w, ln2b, b.res2, b.ln2Mean, b.ln2Rstd))
      .append(proj.backward)
      .run(attentionBackward(rt, { dqkv: s.dqkv, dout: s.datty, qkv: b.qkv, att: b.att, B, T, C: Cl, NH: NHl }))
      .append(qkv.backward)
      .run(lnBackward(ln1w, ln1b, x, b.ln1Mean, b.ln1Rstd));
    return { forward, backward };
  }

  private prepareHead(): HeadCommands {
    const { rt, tp, acts: a, scratch: s } = this;
    const C = this.config.d_model;
    const V = this.config.vocab_size;
    const N = this.B * this.T;
    const L = this.config.n_layer;
    const [lnfW, lnfB, wte] = ['ln_f.weight', 'ln_f.bias', 'wte.weight'].map((n) => this.params.get(`transformer.${n}`));
    const lmHead = columnParallelLinear(rt, tp, {
      x: a.lnf,
      y: a.logits,
      dx: s.dln,
      dy: a.logits,
      w: wte,
      N,
      C,
      OC: wte.shape[0], // this rank's vocabulary rows (padded at 16 bits: tp-layout.ts)
      labels: { layer: 'head', half: 'vocab' },
    });
    const crossEntropy = (scale: number) =>
      vocabParallelCrossEntropy(rt, tp, {
        losses: a.losses,
        logits: a.logits,
        targets: a.targets,
        stats: s.rowStats,
        N,
        V,
        dlossScale: this.lossScale,
        scale,
      });
    const ce = crossEntropy(1);
    const logits = new CommandList()
      .run(
        layernormForward(rt, {
          out: a.lnf,
          mean: a.lnfMean,
          rstd: a.lnfRstd,
          inp: a.resid[L]!,
          weight: lnfW.param,
          bias: lnfB.param,
          N,
          C,
        }),
      )
      .append(lmHead.forward);
    const lossSum = sum(rt, { out: this.lossMicro, inp: a.losses, n: N, scale: this.lossScale });
    const trainAt = new Map<number, CommandList>([[1, new CommandList().append(logits).append(ce.train).run(lossSum)]]);
    return {
      train: (scale) => {
        let w = trainAt.get(scale);
        if (!w) trainAt.set(scale, (w = new CommandList().append(logits).append(crossEntropy(scale).train).run(lossSum)));
        return w;
      },
      eval: new CommandList().append(logits).append(ce.eval),
      // dlnf = dlogits @ wte, dwte += dlogits^T @ lnf, then ln_f
      backward: new CommandList().append(lmHead.backward).run(
        layernormBackward(rt, {
          dinp: s.dresid,
          dweight: lnfW.grad,
          dbias: lnfB.grad,
          dout: s.dln,
          inp: a.resid[L]!,
          weight: lnfW.param,
          mean: a.lnfMean,
          rstd: a.lnfRstd,
          N,
          C,
        }),
      ),
    };
  }

  /**
   * fp16's dynamic loss scaling: the next backward is seeded with dloss x scale (every gradient
   * carries the factor; the optimizer divides it out). The reported loss is not scaled.
   */
  setLossScale(scale: number) {
    if (!(scale > 0) || !Number.isFinite(scale)) throw new Error(`loss scale must be a positive finite number, got ${scale}`);
    this.lossScaleFactor = scale;
  }

  /** Record one layer's forward; a block's input slice is kept first under partitioned checkpointing. */
  private async recordForward(layer: LayerInfo, mode: 'train' | 'eval', pass: Pass) {
    const i = layer.index;
    if (i === 0) return this.embedding!.forward.record(this.rt, pass);
    if (i === this.config.n_layer + 1) {
      await (mode === 'train' ? this.head!.train(this.lossScaleFactor) : this.head!.eval).record(this.rt, pass);
      if (mode === 'train') this.rt.run(this.lossAccumulate);
      return;
    }
    const l = i - 1;
    if (this.partitioned && pass === 'forward') {
      const slice = this.acts.slices[l]!;
      this.rt.copy(this.acts.resid[l]!, slice, slice.byteLength, this.tp.rank * slice.byteLength, 0);
    }
    return this.blocks[l]!.forward.record(this.rt, pass);
  }

  /** Upload one micro-batch of token ids (B*T) and, for training or eval, next-token targets. */
  setBatch(idx: Uint32Array, targets?: Uint32Array) {
    const n = this.B * this.T;
    if (idx.length !== n) throw new Error(`batch has ${idx.length} tokens, the model expects B*T = ${n}`);
    if (this.stage.first) this.rt.write(this.acts.idx, idx);
    if (targets && this.stage.last) {
      if (targets.length !== n) throw new Error(`targets have ${targets.length} tokens, expected ${n}`);
      this.rt.write(this.acts.targets, targets);
    }
  }

  /** Zero the step's loss accumulator and every gradient (start of an optimizer step). */
  zeroGrad() {
    this.params.zeroGrad();
    this.rt.clear(this.lossAcc);
  }

  /** Record forward (+ loss and its gradient in 'train' mode) for the uploaded batch. */
  async forward(mode: 'train' | 'eval' = 'train') {
    const h = this.hooks;
    for (const layer of this.layers) {
      await h.beforeForward?.(layer);
      await this.recordForward(layer, mode, 'forward');
      await h.afterForward?.(layer);
    }
  }

  /** Record backward; gradients accumulate (+=) into the grads arena. */
  async backward() {
    const h = this.hooks;
    const L = this.config.n_layer;
    for (let k = this.layers.length - 1; k >= 0; k--) {
      const layer = this.layers[k]!;
      const i = layer.index;
      await h.beforeBackward?.(layer);
      if (i === L + 1) {
        this.rt.clear(this.scratch.dresid);
        await this.head!.backward.record(this.rt);
      } else if (i === 0) await this.embedding!.backward.record(this.rt);
      else {
        if (this.checkpointing) {
          if (this.partitioned)
            await this.tp.allGather(this.acts.slices[i - 1]!, this.acts.resid[i - 1]!, {
              layer: layer.name,
              op: 'gather-input',
              pass: 'backward',
            });
          await this.recordForward(layer, 'train', 'recompute');
        }
        await this.blocks[i - 1]!.backward.record(this.rt);
      }
      await h.afterBackward?.(layer);
      for (const p of [...layer.params].reverse()) await h.gradReady?.(p);
    }
  }

  /** The step's accumulated loss (reads back one float). */
  async readLoss(): Promise<number> {
    return (await this.rt.read(this.lossAcc))[0]!;
  }

  /** Per-token losses of the last forward (B*T), the same on every rank of a TP group. */
  async readLosses(): Promise<Float32Array> {
    return this.rt.read(this.acts.losses);
  }

  /** Logits of the last forward at one position of each row: (B, V) (a single rank's model). */
  async readLogitsAt(t: number): Promise<Float32Array[]> {
    if (this.tp.size > 1) throw new Error(`readLogitsAt reads whole logits rows; this rank holds 1/${this.tp.size} of the vocabulary`);
    const V = this.config.vocab_size;
    const Vl = this.acts.logits.numel / (this.B * this.T); // rows padded at 16 bits
    const out: Float32Array[] = [];
    const all = await this.rt.read(this.acts.logits);
    for (let b = 0; b < this.B; b++) out.push(all.slice((b * this.T + t) * Vl, (b * this.T + t) * Vl + V));
    return out;
  }
}
