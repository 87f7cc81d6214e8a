// GPT-2 with Megatron-LM tensor parallelism: the same model as gpt.ts, split inside each layer
// over the T ranks of a tensor-parallel group (layout in tp-layout.ts). Each rank holds only
// its shards; the collectives come from the injected TensorParallelOps (parallel/ owns them).
//
//   embedding:  resid[0] = g(own vocab rows of wte[idx] (else 0) + wpe on rank 0)
//   block l, x = resid[l] (B,T,C), hs = C/NH, local heads NH/T:
//     ln1 = LN(x)                                    replicated
//     qkv = f(ln1) @ Wattn_r^T + b_r   (N, 3C/T)     column-parallel: q, k, v of own heads
//     atty = attention(qkv)            (N, C/T)      own heads
//     res2 = x + (g(atty @ Wproj_r^T) + bproj)       row-parallel, bias once after the all-reduce
//     ln2 = LN(res2); fch = f(ln2) @ Wfc_r^T + b_r (N, 4C/T); y = res2 + (g(gelu(fch) @ Wfcproj_r^T) + b)
//   head: lnf = LN(resid[L]); logits_r = f(lnf) @ wte_r^T (N, Vp/T), never gathered;
//     vocab-parallel cross-entropy: all-reduce max, target logit (sum), sum of exponentials (sum)
// f and g are the injected ops' conjugate operators (f: identity forward, all-reduce backward;
// g: all-reduce forward, identity backward), called at their places in forward and backward.
// Per block: two all-reduces of N*C floats in forward (g), two in backward (f).
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { attentionBackward, attentionForward } from '../kernels/attention.js';
import { biasBackward } from '../kernels/bias-backward.js';
import { biasResidual } from '../kernels/bias-residual.js';
import { geluBackward, geluForward } from '../kernels/gelu.js';
import { layernormBackward, layernormForward } from '../kernels/layernorm.js';
import { matmul } from '../kernels/matmul.js';
import { sum } from '../kernels/reduce.js';
import { addInPlace } from '../kernels/residual.js';
import { vocabCrossEntropy, vocabEmbeddingBackward, vocabEmbeddingForward } from '../kernels/vocab-parallel.js';
import { type GptConfig, validateGptConfig } from './config.js';
import type { GptOptions, LayerInfo, ModelHooks } from './gpt.js';
import { ParamStore } from './params.js';
import type { TensorParallelOps, TensorParallelOptions } from './tensor-parallel.js';
import { tpParamSpecs, validateTensorParallel, vocabShard } from './tp-layout.js';

interface TpBlockActs {
  ln1: GpuTensor; // (B,T,C)
  ln1Mean: GpuTensor; // (B,T)
  ln1Rstd: GpuTensor; // (B,T)
  qkv: GpuTensor; // (B,T,3C/T)
  att: GpuTensor; // (B,NH/T,T,T)
  atty: GpuTensor; // (B,T,C/T)
  res2: GpuTensor; // (B,T,C)
  ln2: GpuTensor; // (B,T,C)
  ln2Mean: GpuTensor; // (B,T)
  ln2Rstd: GpuTensor; // (B,T)
  fch: GpuTensor; // (B,T,4C/T)
  fchGelu: GpuTensor; // (B,T,4C/T)
}

// A block's prepared launches, cut where f and g sit:
//   forward:  ln1 | f | attn | g | ln2 | f | mlp | g | out
//   backward: bwdMlp | f' | bwdLn2 | g' | bwdAttn | f' | bwdIn     (' = backward; g' is the identity)
interface TpBlockKernels {
  ln1: Dispatch[];
  /** qkv, attention, partial projection (into `partial`) */
  attn: Dispatch[];
  /** res2 = x + (partial + b) after the all-reduce; ln2 */
  ln2: Dispatch[];
  /** fc, gelu, partial MLP projection */
  mlp: Dispatch[];
  /** y = res2 + (partial + b) after the all-reduce */
  out: Dispatch[];
  /** MLP backward down to the partial dln */
  bwdMlp: Dispatch[];
  /** ln2 backward: dres2 in dresid */
  bwdLn2: Dispatch[];
  /** attention backward down to the partial dln */
  bwdAttn: Dispatch[];
  /** ln1 backward (dx accumulates into dresid) */
  bwdIn: Dispatch[];
}

/**
 * The blocks [from, to) one pipeline stage computes, plus the embedding on the first stage and
 * ln_f + the head on the last (which keeps its own shard of the tied wte). The same shape as the
 * pipeline's StageRange, so 3D runs one TP group per stage: the stage's input is resid[from]
 * (identical on every rank of the TP group), backward expects dL/d resid[to] in dresid (except on
 * the last stage) and leaves dL/d resid[from] there.
 */
export interface TpStage {
  from: number;
  to: number;
  first: boolean;
  last: boolean;
}

export interface TpGptOptions extends Omit<GptOptions, 'params'> {
  tp: TensorParallelOptions;
  stage?: TpStage;
  /** share this rank's shards with another instance (pipeline activation slots); built from tpParamSpecs + stageOwns */
  params?: ParamStore;
}

/** Does a stage hold this parameter? */
export function stageOwns(stage: TpStage, name: string): boolean {
  const m = /^transformer\.h\.(\d+)\./.exec(name);
  if (m) return Number(m[1]) >= stage.from && Number(m[1]) < stage.to;
  if (name === 'transformer.wte.weight') return stage.first || stage.last;
  if (name === 'transformer.wpe.weight') return stage.first;
  return stage.last; // ln_f
}

export class TpGpt {
  readonly config: GptConfig;
  readonly params: ParamStore;
  readonly layers: LayerInfo[];
  readonly B: number;
  readonly T: number;
  readonly checkpointing: boolean;
  readonly partitioned: boolean;
  readonly lossScale: number;
  readonly ops: TensorParallelOps;
  readonly stage: TpStage;
  hooks: ModelHooks = {};
  readonly lossMicro: GpuTensor;
  readonly lossAcc: GpuTensor;
  /** residual stream resid[from..to]; with partitioned checkpointing two full buffers alternate (resid[l] = buf[l % 2]) */
  readonly resid: GpuTensor[];
  /** partitioned checkpointing: this rank's 1/T slice of each block input (B*T*C/T) */
  readonly slices: GpuTensor[];
  /** (B,T,C) gradient of the residual stream, updated in place block by block */
  readonly dresid: GpuTensor;
  private readonly blockActs: TpBlockActs[];
  private readonly partial: GpuTensor; // (B,T,C) partial row-parallel products, all-reduced in place
  private readonly dln: GpuTensor; // (B,T,C)
  private readonly losses: GpuTensor; // (B,T)
  private readonly idx: GpuTensor;
  private readonly targets: GpuTensor;
  private readonly rowMax: GpuTensor;
  private readonly rowSum: GpuTensor;
  private readonly targetLogit: GpuTensor;
  private readonly embFwd: Dispatch[] = [];
  private readonly embBwd: Dispatch[] = [];
  private readonly blocks: TpBlockKernels[] = [];
  private readonly headLogits: Dispatch[] = [];
  private readonly ceStats: Dispatch[] = [];
  private readonly ceSumExp: Dispatch[] = [];
  private readonly ceTrain: Dispatch[] = [];
  private readonly ceEval: Dispatch[] = [];
  private readonly headBwdPartial: Dispatch[] = [];
  private readonly headBwdLn: Dispatch[] = [];
  private readonly lossAccumulate: Dispatch[];

  constructor(
    readonly rt: Runtime,
    config: GptConfig,
    opts: TpGptOptions,
  ) {
    this.config = validateGptConfig(config);
    const { B, T } = opts;
    const ops = (this.ops = opts.tp.ops);
    const TP = ops.size;
    validateTensorParallel(config, TP);
    if (!Number.isInteger(B) || B < 1) throw new Error(`batch rows must be a positive integer, got ${B}`);
    if (!Number.isInteger(T) || T < 1 || T > config.block_size)
      throw new Error(`sequence length ${T} must be between 1 and block_size ${config.block_size}`);
    this.B = B;
    this.T = T;
    this.checkpointing = opts.checkpointing ?? false;
    this.partitioned = this.checkpointing && (opts.tp.partitionActivations ?? true) && TP > 1;
    this.lossScale = opts.lossScale ?? 1 / (B * T);
    const L = config.n_layer;
    const stage = (this.stage = opts.stage ?? { from: 0, to: L, first: true, last: true });
    const { from, to, first, last } = stage;
    if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= L))
      throw new Error(`stage blocks [${from}, ${to}) must lie within the model's ${L} blocks`);
    if (first !== (from === 0) || last !== (to === L))
      throw new Error(`stage [${from}, ${to}): first/last must mark the stages that hold the embedding and the head`);
    this.params =
      opts.params ??
      new ParamStore(
        rt,
        config,
        undefined,
        false,
        tpParamSpecs(config, TP).filter((s) => stageOwns(stage, s.name)),
      );
    const C = config.d_model;
    const V = config.vocab_size;
    const N = B * T;
    const { vStart, Vl } = vocabShard(V, TP, ops.rank);
    const act = (n: string, shape: number[]) => rt.allocator.tensor(n, 'activations', shape);
    const work = (n: string, shape: number[]) => rt.allocator.tensor(n, 'workspace', shape);

    this.resid = [];
    this.slices = [];
    if (this.partitioned) {
      const bufs = [act('resid.even', [N, C]), act('resid.odd', [N, C])];
      for (let l = from; l <= to; l++) this.resid[l] = bufs[l % 2]!;
      for (let l = from; l < to; l++) this.slices[l] = act(`resid.${l}.slice${ops.rank}`, [(N * C) / TP]);
    } else {
      for (let l = from; l <= to; l++) this.resid[l] = act(`${opts.actsPrefix ?? ''}resid.${l}`, [N, C]);
    }
    const blockActs = (name: string): TpBlockActs => ({
      ln1: act(`${name}.ln1`, [N, C]),
      ln1Mean: act(`${name}.ln1_mean`, [N]),
      ln1Rstd: act(`${name}.ln1_rstd`, [N]),
      qkv: act(`${name}.qkv`, [N, (3 * C) / TP]),
      att: act(`${name}.att`, [B, config.n_head / TP, T, T]),
      atty: act(`${name}.atty`, [N, C / TP]),
      res2: act(`${name}.res2`, [N, C]),
      ln2: act(`${name}.ln2`, [N, C]),
      ln2Mean: act(`${name}.ln2_mean`, [N]),
      ln2Rstd: act(`${name}.ln2_rstd`, [N]),
      fch: act(`${name}.fch`, [N, (4 * C) / TP]),
      fchGelu: act(`${name}.fch_gelu`, [N, (4 * C) / TP]),
    });
    const shared = this.checkpointing ? blockActs('block.shared') : null;
    this.blockActs = [];
    for (let l = from; l < to; l++) this.blockActs[l] = shared ?? blockActs(`block.${l}`);
    this.losses = act('losses', [N]);
    this.idx = act('idx', [N]);
    this.targets = act('targets', [N]);
    this.partial = work('tp.partial', [N, C]);
    this.dresid = work('dresid', [N, C]);
    this.dln = work('dln', [N, C]);
    const datty = work('datty', [N, C / TP]);
    const dqkv = work('dqkv', [N, (3 * C) / TP]);
    const dfch = work('dfch', [N, (4 * C) / TP]);
    this.rowMax = work('ce.row_max', [N]);
    this.rowSum = work('ce.row_sum', [N]);
    this.targetLogit = work('ce.target_logit', [N]);
    this.lossMicro = work('loss.micro', [1]);
    this.lossAcc = work('loss.step', [1]);

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
              // a last stage without the embedding owns its copy of the tied wte shard
              params: [...(first ? [] : [p('transformer.wte.weight')]), p('transformer.ln_f.weight'), p('transformer.ln_f.bias')],
              uses: [p('transformer.ln_f.weight'), p('transformer.ln_f.bias'), p('transformer.wte.weight')],
            },
          ]
        : []),
    ];

    if (first) {
      const wte = p('transformer.wte.weight');
      const wpe = p('transformer.wpe.weight');
      this.embFwd = vocabEmbeddingForward(rt, {
        out: this.resid[0]!,
        idx: this.idx,
        wte: wte.param,
        wpe: wpe.param,
        B,
        T,
        C,
        vStart,
        Vl,
        addPositions: ops.rank === 0,
      });
      this.embBwd = vocabEmbeddingBackward(rt, { dwte: wte.grad, dwpe: wpe.grad, dout: this.dresid, idx: this.idx, B, T, C, vStart, Vl });
    }
    for (const l of blockRange)
      this.blocks[l] = this.prepareBlock(l, this.resid[l]!, this.resid[l + 1]!, this.blockActs[l]!, { datty, dqkv, dfch });
    this.lossAccumulate = addInPlace(rt, { dst: this.lossAcc, src: this.lossMicro, n: 1 });
    if (!last) return;

    const wte = p('transformer.wte.weight');
    const lnf = act('lnf', [N, C]);
    const lnfMean = act('lnf_mean', [N]);
    const lnfRstd = act('lnf_rstd', [N]);
    const logits = act(`logits.shard${ops.rank}`, [N, Vl]);
    const lnfW = p('transformer.ln_f.weight');
    const lnfB = p('transformer.ln_f.bias');
    this.headLogits.push(
      ...layernormForward(rt, { out: lnf, mean: lnfMean, rstd: lnfRstd, inp: this.resid[L]!, weight: lnfW.param, bias: lnfB.param, N, C }),
      ...matmul(rt, { out: logits, a: lnf, b: wte.param, M: N, N: Vl, K: C, transB: true }),
    );
    const ce = (writeGrad: boolean) =>
      vocabCrossEntropy(rt, {
        losses: this.losses,
        logits,
        targets: this.targets,
        rowMax: this.rowMax,
        rowSum: this.rowSum,
        targetLogit: this.targetLogit,
        N,
        V,
        vStart,
        Vl,
        writeGrad,
        dlossScale: this.lossScale,
      });
    const train = ce(true);
    this.ceStats.push(...train.stats);
    this.ceSumExp.push(...train.sumExp);
    this.ceTrain.push(...train.finish, ...sum(rt, { out: this.lossMicro, inp: this.losses, n: N, scale: this.lossScale }));
    this.ceEval.push(...ce(false).finish);
    this.headBwdPartial.push(
      // dlnf partial (N,C) = dlogits_r (N,Vl) @ wte_r (Vl,C); dwte_r += dlogits_r^T @ lnf
      ...matmul(rt, { out: this.dln, a: logits, b: wte.param, M: N, N: C, K: Vl }),
      ...matmul(rt, { out: wte.grad, a: logits, b: lnf, M: Vl, N: C, K: N, transA: true, accumulate: true }),
    );
    this.headBwdLn.push(
      ...layernormBackward(rt, {
        dinp: this.dresid,
        dweight: lnfW.grad,
        dbias: lnfB.grad,
        dout: this.dln,
        inp: this.resid[L]!,
        weight: lnfW.param,
        mean: lnfMean,
        rstd: lnfRstd,
        N,
        C,
      }),
    );
  }

  private prepareBlock(
    l: number,
    x: GpuTensor,
    y: GpuTensor,
    b: TpBlockActs,
    s: { datty: GpuTensor; dqkv: GpuTensor; dfch: GpuTensor },
  ): TpBlockKernels {
    const rt = this.rt;
    const C = this.config.d_model;
    const TP = this.ops.size;
    const Cl = C / TP; // own heads' columns
    const NHl = this.config.n_head / TP;
    const { B, T } = this;
    const N = B * T;
    const w = (n: string) => this.params.get(`transformer.h.${l}.${n}`);
    const ln1w = w('ln_1.weight');
    const ln1b = w('ln_1.bias');
    const attnW = w('attn.c_attn.weight'); // (3C/T, C)
    const attnB = w('attn.c_attn.bias'); // (3C/T)
    const projW = w('attn.c_proj.weight'); // (C, C/T)
    const projB = w('attn.c_proj.bias'); // (C) replicated
    const ln2w = w('ln_2.weight');
    const ln2b = w('ln_2.bias');
    const fcW = w('mlp.c_fc.weight'); // (4C/T, C)
    const fcB = w('mlp.c_fc.bias'); // (4C/T)
    const fcprojW = w('mlp.c_proj.weight'); // (C, 4C/T)
    const fcprojB = w('mlp.c_proj.bias'); // (C) replicated
    const part = this.partial;
    const dresid = this.dresid;
    const dln = this.dln;
    return {
      ln1: layernormForward(rt, { out: b.ln1, mean: b.ln1Mean, rstd: b.ln1Rstd, inp: x, weight: ln1w.param, bias: ln1b.param, N, C }),
      attn: [
        ...matmul(rt, { out: b.qkv, a: b.ln1, b: attnW.param, bias: attnB.param, M: N, N: 3 * Cl, K: C, transB: true }),
        ...attentionForward(rt, { out: b.atty, att: b.att, qkv: b.qkv, B, T, C: Cl, NH: NHl }),
        ...matmul(rt, { out: part, a: b.atty, b: projW.param, M: N, N: C, K: Cl, transB: true }),
      ],
      ln2: [
        ...biasResidual(rt, { out: b.res2, res: x, sum: part, bias: projB.param, N, C }),
        ...layernormForward(rt, { out: b.ln2, mean: b.ln2Mean, rstd: b.ln2Rstd, inp: b.res2, weight: ln2w.param, bias: ln2b.param, N, C }),
      ],
      mlp: [
        ...matmul(rt, { out: b.fch, a: b.ln2, b: fcW.param, bias: fcB.param, M: N, N: 4 * Cl, K: C, transB: true }),
        ...geluForward(rt, { out: b.fchGelu, inp: b.fch, n: N * 4 * Cl }),
        ...matmul(rt, { out: part, a: b.fchGelu, b: fcprojW.param, M: N, N: C, K: 4 * Cl, transB: true }),
      ],
      out: biasResidual(rt, { out: y, res: b.res2, sum: part, bias: fcprojB.param, N, C }),
      // dresid holds dL/dy on entry and dL/dx on exit; dL/dy is the same on every rank
      bwdMlp: [
        ...matmul(rt, { out: s.dfch, a: dresid, b: fcprojW.param, M: N, N: 4 * Cl, K: C }),
        ...matmul(rt, { out: fcprojW.grad, a: dresid, b: b.fchGelu, M: C, N: 4 * Cl, K: N, transA: true, accumulate: true }),
        ...biasBackward(rt, { dbias: fcprojB.grad, dout: dresid, M: N, N: C, accumulate: true }),
        ...geluBackward(rt, { dinp: s.dfch, inp: b.fch, dout: s.dfch, n: N * 4 * Cl }),
        ...matmul(rt, { out: dln, a: s.dfch, b: fcW.param, M: N, N: C, K: 4 * Cl }),
        ...matmul(rt, { out: fcW.grad, a: s.dfch, b: b.ln2, M: 4 * Cl, N: C, K: N, transA: true, accumulate: true }),
        ...biasBackward(rt, { dbias: fcB.grad, dout: s.dfch, M: N, N: 4 * Cl, accumulate: true }),
      ],
      bwdLn2: layernormBackward(rt, {
        dinp: dresid,
        dweight: ln2w.grad,
        dbias: ln2b.grad,
        dout: dln,
        inp: b.res2,
        weight: ln2w.param,
        mean: b.ln2Mean,
        rstd: b.ln2Rstd,
        N,
        C,
      }),
      bwdAttn: [
        ...matmul(rt, { out: s.datty, a: dresid, b: projW.param, M: N, N: Cl, K: C }),
        ...matmul(rt, { out: projW.grad, a: dresid, b: b.atty, M: C, N: Cl, K: N, transA: true, accumulate: true }),
        ...biasBackward(rt, { dbias: projB.grad, dout: dresid, M: N, N: C, accumulate: true }),
        ...attentionBackward(rt, { dqkv: s.dqkv, dout: s.datty, qkv: b.qkv, att: b.att, B, T, C: Cl, NH: NHl }),
        ...matmul(rt, { out: dln, a: s.dqkv, b: attnW.param, M: N, N: C, K: 3 * Cl }),
        ...matmul(rt, { out: attnW.grad, a: s.dqkv, b: b.ln1, M: 3 * Cl, N: C, K: N, transA: true, accumulate: true }),
        ...biasBackward(rt, { dbias: attnB.grad, dout: s.dqkv, M: N, N: 3 * Cl, accumulate: true }),
      ],
      bwdIn: layernormBackward(rt, {
        dinp: dresid,
        dweight: ln1w.grad,
        dbias: ln1b.grad,
        dout: dln,
        inp: x,
        weight: ln1w.param,
        mean: b.ln1Mean,
        rstd: b.ln1Rstd,
        N,
        C,
      }),
    };
  }

  private async blockForward(l: number, pass: 'forward' | 'recompute') {
    const k = this.blocks[l]!;
    const name = `block.${l}`;
    if (this.partitioned && pass === 'forward') {
      // keep only this rank's slice of the block input until backward
      const bytes = this.slices[l]!.byteLength;
      this.rt.copy(this.resid[l]!, this.slices[l]!, bytes, this.ops.rank * bytes, 0);
    }
    const { f, g } = this.ops;
    this.rt.run(k.ln1);
    await f.forward(this.blockActs[l]!.ln1, { layer: name, half: 'attn', pass });
    this.rt.run(k.attn);
    await g.forward(this.partial, { layer: name, half: 'attn', pass });
    this.rt.run(k.ln2);
    await f.forward(this.blockActs[l]!.ln2, { layer: name, half: 'mlp', pass });
    this.rt.run(k.mlp);
    await g.forward(this.partial, { layer: name, half: 'mlp', pass });
    this.rt.run(k.out);
  }

  setBatch(idx: Uint32Array, targets?: Uint32Array) {
    const n = this.B * this.T;
    if (idx.length !== n) throw new Error(`batch has ${idx.length} tokens, the model expects B*T = ${n}`);
    if (this.stage.first) this.rt.write(this.idx, idx);
    if (targets && this.stage.last) {
      if (targets.length !== n) throw new Error(`targets have ${targets.length} tokens, expected ${n}`);
      this.rt.write(this.targets, targets);
    }
  }

  zeroGrad() {
    this.params.zeroGrad();
    this.rt.clear(this.lossAcc);
  }

  async forward(mode: 'train' | 'eval' = 'train') {
    const h = this.hooks;
    const L = this.config.n_layer;
    const { from, to, first, last } = this.stage;
    if (first) {
      await h.beforeForward?.(this.layerAt(0));
      this.rt.run(this.embFwd);
      await this.ops.g.forward(this.resid[0]!, { layer: 'embedding', half: 'vocab' });
      await h.afterForward?.(this.layerAt(0));
    }
    for (let l = from; l < to; l++) {
      const layer = this.layerAt(l + 1);
      await h.beforeForward?.(layer);
      await this.blockForward(l, 'forward');
      await h.afterForward?.(layer);
    }
    if (!last) return;
    const head = this.layerAt(L + 1);
    await h.beforeForward?.(head);
    this.rt.run(this.headLogits); // f.forward(lnf) is the identity: the logits' shard needs no communication
    this.rt.run(this.ceStats);
    await this.ops.allReduce(this.rowMax, { layer: 'head', op: 'ce-max', pass: 'forward' }, 'max');
    await this.ops.allReduce(this.targetLogit, { layer: 'head', op: 'ce-target', pass: 'forward' });
    this.rt.run(this.ceSumExp);
    await this.ops.allReduce(this.rowSum, { layer: 'head', op: 'ce-sumexp', pass: 'forward' });
    this.rt.run(mode === 'train' ? this.ceTrain : this.ceEval);
    if (mode === 'train') this.rt.run(this.lossAccumulate);
    await h.afterForward?.(head);
  }

  async backward() {
    const h = this.hooks;
    const L = this.config.n_layer;
    const { from, to, first, last } = this.stage;
    if (last) {
      const head = this.layerAt(L + 1);
      await h.beforeBackward?.(head);
      this.rt.clear(this.dresid);
      this.rt.run(this.headBwdPartial);
      await this.ops.f.backward(this.dln, { layer: 'head', half: 'vocab' });
      this.rt.run(this.headBwdLn);
      await h.afterBackward?.(head);
      for (const p of [...head.params].reverse()) await h.gradReady?.(p);
    }
    for (let l = to - 1; l >= from; l--) {
      const layer = this.layerAt(l + 1);
      const name = `block.${l}`;
      await h.beforeBackward?.(layer);
      if (this.checkpointing) {
        if (this.partitioned)
          await this.ops.allGather(this.slices[l]!, this.resid[l]!, { layer: name, op: 'gather-input', pass: 'backward' });
        await this.blockForward(l, 'recompute');
      }
      const k = this.blocks[l]!;
      const { f, g } = this.ops;
      await g.backward(this.dresid, { layer: name, half: 'mlp' });
      this.rt.run(k.bwdMlp);
      await f.backward(this.dln, { layer: name, half: 'mlp' });
      this.rt.run(k.bwdLn2);
      await g.backward(this.dresid, { layer: name, half: 'attn' });
      this.rt.run(k.bwdAttn);
      await f.backward(this.dln, { layer: name, half: 'attn' });
      this.rt.run(k.bwdIn);
      await h.afterBackward?.(layer);
      for (const p of [...layer.params].reverse()) await h.gradReady?.(p);
    }
    if (!first) return;
    const emb = this.layerAt(0);
    await h.beforeBackward?.(emb);
    this.rt.run(this.embBwd);
    await h.afterBackward?.(emb);
    for (const p of [...emb.params].reverse()) await h.gradReady?.(p);
  }

  /** layer by index (0 = embedding, 1..L = blocks, L+1 = head); layers holds only a stage's own */
  private layerAt(index: number): LayerInfo {
    const l = this.layers.find((x) => x.index === index);
    if (!l) throw new Error(`layer ${index} is not part of this pipeline stage`);
    return l;
  }

  async readLoss(): Promise<number> {
    return (await this.rt.read(this.lossAcc))[0]!;
  }

  /** Per-token losses of the last forward (B*T), the same on every rank. */
  async readLosses(): Promise<Float32Array> {
    return this.rt.read(this.losses);
  }
}
