// GPT-2 as nanoGPT writes it: token + learned position embeddings, L pre-layernorm blocks
// (causal self-attention, GELU-tanh MLP), final layernorm, LM head tied to wte.
// The model records prepared kernel launches and never talks to the network: strategies
// wrap it through the layer hooks and the gradient-ready event (Megatron's separation).
//
//   block l, x = resid[l] (B,T,C):
//     ln1 = LN(x); qkv = ln1 @ Wattn^T + b; atty = attention(qkv); res2 = x + atty @ Wproj^T + b
//     ln2 = LN(res2); fch = ln2 @ Wfc^T + b; y = res2 + gelu(fch) @ Wfcproj^T + b = resid[l+1]
//   head: lnf = LN(resid[L]); logits = lnf @ wte^T (B,T,V); loss = mean over the global batch
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { attentionBackward, attentionForward } from '../kernels/attention.js';
import { biasBackward } from '../kernels/bias-backward.js';
import { crossEntropyForward, softmaxCrossEntropy } from '../kernels/crossentropy.js';
import { encoderBackward, encoderForward } from '../kernels/encoder.js';
import { geluBackward, geluForward } from '../kernels/gelu.js';
import { layernormBackward, layernormForward } from '../kernels/layernorm.js';
import { matmul } from '../kernels/matmul.js';
import { sum } from '../kernels/reduce.js';
import { addInPlace } from '../kernels/residual.js';
import { type Activations, allocateActivations, allocateScratch, type BlockActs, type Scratch, type StageRange } from './activations.js';
import { type GptConfig, validateGptConfig } from './config.js';
import { type ParamRef, ParamStore } from './params.js';

export interface LayerInfo {
  /** 0 = embedding, 1..L = blocks, L+1 = head */
  index: number;
  name: string;
  /** parameters this layer owns (their gradients are complete after its backward) */
  params: ParamRef[];
  /** parameters this layer reads in forward/backward (owned ones plus the tied wte for the head) */
  uses: ParamRef[];
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
  /** share parameters with another instance (e.g. an eval model of a different batch size) */
  params?: ParamStore;
  /**
   * pipeline stage: only blocks [from, to), plus the embedding on the first stage and ln_f + the
   * LM head on the last (which reads its own copy of wte). A stage's input is acts.resid[from]
   * (written by the pipeline before forward); backward expects dL/d resid[to] in scratch.dresid
   * (except on the last stage) and leaves dL/d resid[from] there.
   */
  stage?: StageRange;
  /** share the backward scratch with another instance (pipeline activation slots run backward one at a time) */
  scratch?: Scratch;
  /** name prefix of this instance's activation buffers (pipeline slots) */
  actsPrefix?: string;
}

interface BlockKernels {
  /** ln1, qkv, attention, projection (accumulating onto res2), ln2, fc, gelu */
  forward: Dispatch[];
  /** the MLP projection, accumulating onto y */
  mlpOut: Dispatch[];
  backward: Dispatch[];
}

export class Gpt {
  readonly config: GptConfig;
  readonly params: ParamStore;
  readonly acts: Activations;
  readonly scratch: Scratch | null;
  readonly layers: LayerInfo[];
  readonly B: number;
  readonly T: number;
  readonly checkpointing: boolean;
  readonly lossScale: number;
  /** the share of the model this instance computes (everything unless it is a pipeline stage) */
  readonly stage: StageRange;
  hooks: ModelHooks = {};
  /** the micro-batch's scaled loss sum (1), and the step's accumulated loss (1) */
  readonly lossMicro: GpuTensor;
  readonly lossAcc: GpuTensor;

  private readonly encoderFwd: Dispatch[] = [];
  private readonly encoderBwd: Dispatch[] = [];
  private readonly blocks: BlockKernels[];
  private readonly headTrain: Dispatch[] = [];
  private readonly headEval: Dispatch[] = [];
  private readonly headBwd: Dispatch[] = [];
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
    this.B = B;
    this.T = T;
    this.checkpointing = opts.checkpointing ?? false;
    this.lossScale = opts.lossScale ?? 1 / (B * T);
    this.params = opts.params ?? new ParamStore(rt, config);
    const L = config.n_layer;
    this.stage = opts.stage ?? { from: 0, to: L, first: true, last: true };
    const { from, to, first, last } = this.stage;
    this.acts = allocateActivations(rt, config, B, T, this.checkpointing, opts.stage, opts.actsPrefix);
    this.scratch = opts.scratch ?? allocateScratch(rt, config, B, T);
    this.lossMicro = rt.allocator.tensor('loss.micro', 'workspace', [1]);
    this.lossAcc = rt.allocator.tensor('loss.step', 'workspace', [1]);

    const p = (n: string) => this.params.get(n);
    const blockRange = Array.from({ length: to - from }, (_, i) => from + i);
    this.layers = [
      ...(first
        ? [
            {
              index: 0,
              name: 'embedding',
              params: [p('transformer.wte.weight'), p('transformer.wpe.weight')],
              uses: [p('transformer.wte.weight'), p('transformer.wpe.weight')],
            },
          ]
        : []),
      ...blockRange.map((l) => {
        const own = this.params.refs.filter((r) => r.name.startsWith(`transformer.h.${l}.`));
        return { index: l + 1, name: `block.${l}`, params: own, uses: own };
      }),
      ...(last
        ? [
            {
              index: L + 1,
              name: 'head',
              // a pipeline's last stage owns its copy of the tied wte (its gradient is summed with the first stage's)
              params: [...(first ? [] : [p('transformer.wte.weight')]), p('transformer.ln_f.weight'), p('transformer.ln_f.bias')],
              uses: [p('transformer.ln_f.weight'), p('transformer.ln_f.bias'), p('transformer.wte.weight')],
            },
          ]
        : []),
    ];

    const C = config.d_model;
    const V = config.vocab_size;
    const N = B * T;
    const a = this.acts;
    const s = this.scratch;
    this.blocks = [];
    for (const l of blockRange) this.blocks[l] = this.prepareBlock(l, a.resid[l]!, a.resid[l + 1]!, a.blocks[l]!, s);
    if (first) {
      const wte = p('transformer.wte.weight');
      const wpe = p('transformer.wpe.weight');
      this.encoderFwd = encoderForward(rt, { out: a.resid[0]!, idx: a.idx, wte: wte.param, wpe: wpe.param, B, T, C });
      this.encoderBwd = encoderBackward(rt, { dwte: wte.grad, dwpe: wpe.grad, dout: s.dresid, idx: a.idx, B, T, C, V });
    }
    this.lossAccumulate = addInPlace(rt, { dst: this.lossAcc, src: this.lossMicro, n: 1 });
    if (!last) return;
    const wte = p('transformer.wte.weight');

    const lnfW = p('transformer.ln_f.weight');
    const lnfB = p('transformer.ln_f.bias');
    const headFwd = [
      ...layernormForward(rt, {
        out: a.lnf,
        mean: a.lnfMean,
        rstd: a.lnfRstd,
        inp: a.resid[L]!,
        weight: lnfW.param,
        bias: lnfB.param,
        N,
        C,
      }),
      ...matmul(rt, { out: a.logits, a: a.lnf, b: wte.param, M: N, N: V, K: C, transB: true }),
    ];
    this.headTrain = [
      ...headFwd,
      ...softmaxCrossEntropy(rt, {
        losses: a.losses,
        dlogits: a.logits,
        logits: a.logits,
        targets: a.targets,
        N,
        V,
        dlossScale: this.lossScale,
      }),
      ...sum(rt, { out: this.lossMicro, inp: a.losses, n: N, scale: this.lossScale }),
    ];
    this.headEval = [...headFwd, ...crossEntropyForward(rt, { losses: a.losses, logits: a.logits, targets: a.targets, N, V })];
    this.headBwd = [
      // dlnf (N,C) = dlogits (N,V) @ wte (V,C); dwte += dlogits^T @ lnf
      ...matmul(rt, { out: s.dln, a: a.logits, b: wte.param, M: N, N: C, K: V }),
      ...matmul(rt, { out: wte.grad, a: a.logits, b: a.lnf, M: V, N: C, K: N, transA: true, accumulate: true }),
      ...layernormBackward(rt, {
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
    ];
  }

  private prepareBlock(l: number, x: GpuTensor, y: GpuTensor, b: BlockActs, s: Scratch): BlockKernels {
    const rt = this.rt;
    const c = this.config;
    const C = c.d_model;
    const NH = c.n_head;
    const { B, T } = this;
    const N = B * T;
    const w = (n: string) => this.params.get(`transformer.h.${l}.${n}`);
    const ln1w = w('ln_1.weight');
    const ln1b = w('ln_1.bias');
    const attnW = w('attn.c_attn.weight');
    const attnB = w('attn.c_attn.bias');
    const projW = w('attn.c_proj.weight');
    const projB = w('attn.c_proj.bias');
    const ln2w = w('ln_2.weight');
    const ln2b = w('ln_2.bias');
    const fcW = w('mlp.c_fc.weight');
    const fcB = w('mlp.c_fc.bias');
    const fcprojW = w('mlp.c_proj.weight');
    const fcprojB = w('mlp.c_proj.bias');

    const forward: Dispatch[] = [
      ...layernormForward(rt, { out: b.ln1, mean: b.ln1Mean, rstd: b.ln1Rstd, inp: x, weight: ln1w.param, bias: ln1b.param, N, C }),
      ...matmul(rt, { out: b.qkv, a: b.ln1, b: attnW.param, bias: attnB.param, M: N, N: 3 * C, K: C, transB: true }),
      ...attentionForward(rt, { out: b.atty, att: b.att, qkv: b.qkv, B, T, C, NH }),
      // res2 = x + atty @ Wproj^T + b: copy x (recorded by forwardBlock), then accumulate
      ...matmul(rt, { out: b.res2, a: b.atty, b: projW.param, bias: projB.param, M: N, N: C, K: C, transB: true, accumulate: true }),
      ...layernormForward(rt, { out: b.ln2, mean: b.ln2Mean, rstd: b.ln2Rstd, inp: b.res2, weight: ln2w.param, bias: ln2b.param, N, C }),
      ...matmul(rt, { out: b.fch, a: b.ln2, b: fcW.param, bias: fcB.param, M: N, N: 4 * C, K: C, transB: true }),
      ...geluForward(rt, { out: b.fchGelu, inp: b.fch, n: N * 4 * C }),
    ];
    // y = res2 + fchGelu @ Wfcproj^T + b (after a copy of res2 into y)
    const mlpOut = matmul(rt, {
      out: y,
      a: b.fchGelu,
      b: fcprojW.param,
      bias: fcprojB.param,
      M: N,
      N: C,
      K: 4 * C,
      transB: true,
      accumulate: true,
    });

    // s.dresid holds dL/dy on entry and dL/dx on exit
    const backward: Dispatch[] = [
      // MLP: dfchGelu = dy @ Wfcproj; dWfcproj += dy^T @ fchGelu; dbfcproj += colsum(dy)
      ...matmul(rt, { out: s.dfch, a: s.dresid, b: fcprojW.param, M: N, N: 4 * C, K: C }),
      ...matmul(rt, { out: fcprojW.grad, a: s.dresid, b: b.fchGelu, M: C, N: 4 * C, K: N, transA: true, accumulate: true }),
      ...biasBackward(rt, { dbias: fcprojB.grad, dout: s.dresid, M: N, N: C, accumulate: true }),
      ...geluBackward(rt, { dinp: s.dfch, inp: b.fch, dout: s.dfch, n: N * 4 * C }),
      ...matmul(rt, { out: s.dln, a: s.dfch, b: fcW.param, M: N, N: C, K: 4 * C }),
      ...matmul(rt, { out: fcW.grad, a: s.dfch, b: b.ln2, M: 4 * C, N: C, K: N, transA: true, accumulate: true }),
      ...biasBackward(rt, { dbias: fcB.grad, dout: s.dfch, M: N, N: 4 * C, accumulate: true }),
      // dres2 = dy + LN2'(dln)
      ...layernormBackward(rt, {
        dinp: s.dresid,
        dweight: ln2w.grad,
        dbias: ln2b.grad,
        dout: s.dln,
        inp: b.res2,
        weight: ln2w.param,
        mean: b.ln2Mean,
        rstd: b.ln2Rstd,
        N,
        C,
      }),
      // attention projection
      ...matmul(rt, { out: s.datty, a: s.dresid, b: projW.param, M: N, N: C, K: C }),
      ...matmul(rt, { out: projW.grad, a: s.dresid, b: b.atty, M: C, N: C, K: N, transA: true, accumulate: true }),
      ...biasBackward(rt, { dbias: projB.grad, dout: s.dresid, M: N, N: C, accumulate: true }),
      ...attentionBackward(rt, { dqkv: s.dqkv, dout: s.datty, qkv: b.qkv, att: b.att, B, T, C, NH }),
      ...matmul(rt, { out: s.dln, a: s.dqkv, b: attnW.param, M: N, N: C, K: 3 * C }),
      ...matmul(rt, { out: attnW.grad, a: s.dqkv, b: b.ln1, M: 3 * C, N: C, K: N, transA: true, accumulate: true }),
      ...biasBackward(rt, { dbias: attnB.grad, dout: s.dqkv, M: N, N: 3 * C, accumulate: true }),
      // dx = dres2 + LN1'(dln)
      ...layernormBackward(rt, {
        dinp: s.dresid,
        dweight: ln1w.grad,
        dbias: ln1b.grad,
        dout: s.dln,
        inp: x,
        weight: ln1w.param,
        mean: b.ln1Mean,
        rstd: b.ln1Rstd,
        N,
        C,
      }),
    ];
    return { forward, mlpOut, backward };
  }

  /** Record the forward of block l (x = resid[l] -> resid[l+1]). */
  private recordBlockForward(l: number) {
    const b = this.acts.blocks[l]!;
    const k = this.blocks[l]!;
    // the attention and MLP outputs accumulate onto copies of their residual inputs
    this.rt.copy(this.acts.resid[l]!, b.res2);
    this.rt.run(k.forward);
    this.rt.copy(b.res2, this.acts.resid[l + 1]!);
    this.rt.run(k.mlpOut);
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
    const L = this.config.n_layer;
    const { from, to, first, last } = this.stage;
    if (first) {
      await h.beforeForward?.(this.layerAt(0));
      this.rt.run(this.encoderFwd);
      await h.afterForward?.(this.layerAt(0));
    }
    for (let l = from; l < to; l++) {
      const layer = this.layerAt(l + 1);
      await h.beforeForward?.(layer);
      this.recordBlockForward(l);
      await h.afterForward?.(layer);
    }
    if (!last) return;
    const head = this.layerAt(L + 1);
    await h.beforeForward?.(head);
    this.rt.run(mode === 'train' ? this.headTrain : this.headEval);
    if (mode === 'train') this.rt.run(this.lossAccumulate);
    await h.afterForward?.(head);
  }

  /** Record backward; gradients accumulate (+=) into the grads arena. */
  async backward() {
    const h = this.hooks;
    const L = this.config.n_layer;
    const { from, to, first, last } = this.stage;
    if (last) {
      const head = this.layerAt(L + 1);
      await h.beforeBackward?.(head);
      this.rt.clear(this.scratch!.dresid);
      this.rt.run(this.headBwd);
      await h.afterBackward?.(head);
      for (const p of [...head.params].reverse()) await h.gradReady?.(p);
    }
    for (let l = to - 1; l >= from; l--) {
      const layer = this.layerAt(l + 1);
      await h.beforeBackward?.(layer);
      if (this.checkpointing) this.recordBlockForward(l);
      this.rt.run(this.blocks[l]!.backward);
      await h.afterBackward?.(layer);
      for (const p of [...layer.params].reverse()) await h.gradReady?.(p);
    }
    if (!first) return;
    const emb = this.layerAt(0);
    await h.beforeBackward?.(emb);
    this.rt.run(this.encoderBwd);
    await h.afterBackward?.(emb);
    for (const p of [...emb.params].reverse()) await h.gradReady?.(p);
  }

  /** layer by index (0 = embedding, 1..L = blocks, L+1 = head); layers holds only a stage's own */
  private layerAt(index: number): LayerInfo {
    const l = this.layers.find((x) => x.index === index);
    if (!l) throw new Error(`layer ${index} is not part of this pipeline stage`);
    return l;
  }

  /** The step's accumulated loss (reads back one float). */
  async readLoss(): Promise<number> {
    return (await this.rt.read(this.lossAcc))[0]!;
  }

  /** Per-token losses of the last forward (B*T). */
  async readLosses(): Promise<Float32Array> {
    return this.rt.read(this.acts.losses);
  }

  /** Logits of the last forward at one position of each row: (B, V). */
  async readLogitsAt(t: number): Promise<Float32Array[]> {
    const V = this.config.vocab_size;
    const out: Float32Array[] = [];
    const all = await this.rt.read(this.acts.logits);
    for (let b = 0; b < this.B; b++) out.push(all.slice((b * this.T + t) * V, (b * this.T + t + 1) * V));
    return out;
  }
}
