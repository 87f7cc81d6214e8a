// AdamW with PyTorch's semantics (decoupled weight decay, bias-corrected moments) and
// global gradient-norm clipping, entirely on the device: the squared norm is reduced into a
// one-float buffer that the update kernel reads, so a step needs no readback.
// m and v sit in two arenas laid out like the parameters, so one launch covers each run of
// consecutive parameters that share a weight-decay setting (nanoGPT: decay matrices and
// embeddings, not biases or layernorm).
//
// Mixed precision (a bf16 or fp16 parameter store): the optimizer also keeps the fp32 master
// weights (a third arena, the same element layout; with m and v the ZeRO paper's K = 12 bytes
// per parameter, category `optimizer`). The update reads the 16-bit gradients, divides out the
// loss scale, clips on the unscaled global norm and updates the master; then one cast launch
// re-derives the 16-bit weights from the whole master. fp16 (dynamic loss scaling) skips the
// update when the sum of squared gradients is inf or NaN: the kernel writes nothing, the cast
// re-derives the same weights, and readGradNorm, the step's one readback, reports the overflow
// and takes the step back from the count t (PyTorch's GradScaler and DeepSpeed skip optimizer.step).
import { Allocator, type Arena, type GpuTensor, viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { adamw, type AdamwHyper } from '../kernels/adamw.js';
import { cast } from '../kernels/cast.js';
import { sumSquares } from '../kernels/reduce.js';
import type { ParamStore } from '../model/params.js';

export interface AdamwConfig {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** 0 disables clipping */
  maxGradNorm: number;
}

export const DEFAULT_ADAMW: AdamwConfig = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1.0 };

/** One AdamW launch over a run of same-decay parameters. */
export interface AdamwRun {
  decay: boolean;
  kernel: { dispatches: Dispatch[]; set(h: AdamwHyper): void };
}

/** Record the update of every run at AdamW step t (decay only where the run takes it); gradScale: the loss scale the gradients carry. */
export function recordAdamwRuns(rt: Runtime, runs: readonly AdamwRun[], c: AdamwConfig, t: number, lr: number, gradScale = 1) {
  for (const r of runs) {
    r.kernel.set({
      lr,
      beta1: c.beta1,
      beta2: c.beta2,
      eps: c.eps,
      weightDecay: r.decay ? c.weightDecay : 0,
      step: t,
      maxGradNorm: c.maxGradNorm,
      ...(gradScale !== 1 ? { gradScale } : {}),
    });
    rt.run(r.kernel.dispatches);
  }
}

export class AdamW {
  readonly mArena: Arena;
  readonly vArena: Arena;
  readonly m = new Map<string, GpuTensor>();
  readonly v = new Map<string, GpuTensor>();
  /** mixed precision: the fp32 master weights, by parameter name (null for an fp32 store, whose weights are the master) */
  readonly master: Map<string, GpuTensor> | null = null;
  /** squared global gradient norm (1) */
  readonly gradSumSq: GpuTensor;
  /** optimizer steps taken (t of the bias correction) */
  step = 0;
  /** fp16: an inf/NaN gradient norm skips the update (dynamic loss scaling's overflow check) */
  readonly skipsOverflow: boolean;
  private readonly runs: AdamwRun[] = [];
  private readonly normKernel: Dispatch[];
  /** mixed precision: the 16-bit weights from the master, after every update */
  private readonly castKernel: Dispatch[] = [];

  constructor(
    private readonly rt: Runtime,
    private readonly store: ParamStore,
    readonly config: AdamwConfig,
  ) {
    const mixed = store.precision !== 'fp32';
    this.skipsOverflow = store.precision === 'fp16';
    const shapes = store.refs.map((r) => r.shape);
    // fp32 state in the store's element layout: its slots hold store.elemsPerSlot elements (4 bytes each here)
    const slotBytes = store.elemsPerSlot * 4;
    const bytes = Allocator.arenaBytesFor(shapes, 'fp32', slotBytes);
    const masterArena = mixed ? rt.allocator.arena('adam.master', 'optimizer', bytes) : null;
    this.mArena = rt.allocator.arena('adam.exp_avg', 'optimizer', bytes);
    this.vArena = rt.allocator.arena('adam.exp_avg_sq', 'optimizer', bytes);
    if (masterArena) this.master = new Map();
    for (const r of store.refs) {
      this.m.set(r.name, this.mArena.alloc(`exp_avg.${r.name}`, r.shape, 'fp32', slotBytes));
      this.v.set(r.name, this.vArena.alloc(`exp_avg_sq.${r.name}`, r.shape, 'fp32', slotBytes));
      if (masterArena) this.master!.set(r.name, masterArena.alloc(`master.${r.name}`, r.shape, 'fp32', slotBytes));
      if (this.m.get(r.name)!.byteOffset !== r.offset * 4) throw new Error('optimizer state layout differs from the parameters');
    }
    this.gradSumSq = rt.allocator.tensor('grad_norm_sq', 'workspace', [1]);
    const gradBase = store.refs[0]!.grad;
    this.normKernel = sumSquares(rt, { out: this.gradSumSq, inp: viewOf(gradBase, 'grads(all)', 0, store.flatElems), n: store.flatElems });
    const weights = (r: (typeof store.refs)[number]) => this.master?.get(r.name) ?? r.param;

    // runs of consecutive parameters with the same decay flag; a run spans the padding between slots
    // (mixed precision: to the end of its last slot, so its length is a whole number of 4-element vectors)
    let i = 0;
    const refs = store.refs;
    while (i < refs.length) {
      const first = refs[i]!;
      let j = i;
      while (j < refs.length && refs[j]!.spec.decay === first.spec.decay) j++;
      const last = refs[j - 1]!;
      const elems = last.offset + (mixed ? store.elemsPerSlot * Math.ceil(last.numel / store.elemsPerSlot) : last.numel) - first.offset;
      const view = (t: GpuTensor, tag: string) => viewOf(t, `${tag}[${first.name}+${j - i}]`, 0, elems);
      const kernel = adamw(rt, {
        params: view(weights(first), mixed ? 'master' : 'p'),
        grads: view(first.grad, 'g'),
        m: view(this.m.get(first.name)!, 'm'),
        v: view(this.v.get(first.name)!, 'v'),
        n: elems,
        gradSumSq: this.gradSumSq,
        skipNonFinite: this.skipsOverflow,
      });
      this.runs.push({ decay: first.spec.decay, kernel });
      i = j;
    }
    if (this.master) {
      const r0 = refs[0]!;
      const n = store.flatElems;
      this.castKernel = cast(rt, { out: viewOf(r0.param, 'params(all)', 0, n), inp: viewOf(weights(r0), 'master(all)', 0, n), n });
    }
  }

  /** Record the squared global gradient norm into gradSumSq (local gradients). */
  recordGradNorm() {
    this.rt.run(this.normKernel);
  }

  /**
   * Record one update with learning rate lr (after recordGradNorm, or after the strategy filled
   * gradSumSq), of gradients that carry the loss scale `gradScale`; mixed precision then casts
   * the master to the 16-bit weights.
   */
  recordStep(lr: number, gradScale = 1) {
    this.step += 1;
    recordAdamwRuns(this.rt, this.runs, this.config, this.step, lr, gradScale);
    this.rt.run(this.castKernel);
  }

  /**
   * The global gradient norm of the step just recorded, unscaled (the step's one readback). inf
   * or NaN: the gradients overflowed; where the optimizer skips overflows, the update wrote
   * nothing and the step is taken back from t.
   */
  async readGradNorm(gradScale = 1): Promise<number> {
    return this.settle((await this.rt.read(this.gradSumSq))[0]!, gradScale);
  }

  /**
   * After recordStep, where the strategy wrote gradSumSq itself (a norm summed over tensor-parallel
   * shards or pipeline stages, the same on every rank): the norm, unscaled; an fp16 overflow wrote
   * nothing, and the step is taken back from t.
   */
  settle(sumSq: number, gradScale = 1): number {
    if (this.skipsOverflow && !Number.isFinite(sumSq)) this.step -= 1;
    return Math.sqrt(sumSq) / gradScale;
  }

  async readState(): Promise<{ m: Map<string, Float32Array>; v: Map<string, Float32Array> }> {
    return { m: await this.readLaidOut(this.m), v: await this.readLaidOut(this.v) };
  }

  /** Mixed precision: the fp32 master weights (the store's shapes: wte with its padding rows). */
  async readMaster(): Promise<Map<string, Float32Array>> {
    if (!this.master) throw new Error('readMaster: an fp32 store has no separate master weights; read the parameters');
    return this.readLaidOut(this.master);
  }

  /** Mixed precision: take these fp32 master weights (the store's shapes) and record the cast of the 16-bit weights from them. */
  writeMaster(values: Map<string, Float32Array>) {
    if (!this.master) throw new Error('writeMaster: an fp32 store has no separate master weights; write the parameters');
    for (const r of this.store.refs) {
      const data = values.get(r.name);
      if (!data || data.length !== r.numel)
        throw new Error(`master weight ${r.name} is missing or has the wrong size (expected ${r.numel})`);
      this.rt.write(this.master.get(r.name)!, data);
    }
    this.rt.run(this.castKernel);
  }

  private async readLaidOut(tensors: Map<string, GpuTensor>): Promise<Map<string, Float32Array>> {
    const first = tensors.get(this.store.refs[0]!.name)!;
    const flat = await this.rt.read(viewOf(first, 'all', 0, this.store.flatElems));
    const out = new Map<string, Float32Array>();
    for (const r of this.store.refs) out.set(r.name, flat.slice(r.offset, r.offset + r.numel));
    return out;
  }

  writeState(state: { m: Map<string, Float32Array>; v: Map<string, Float32Array> }, step: number) {
    for (const r of this.store.refs) {
      for (const [which, src] of [
        ['exp_avg', state.m],
        ['exp_avg_sq', state.v],
      ] as const) {
        const data = src.get(r.name);
        if (!data || data.length !== r.numel) throw new Error(`optimizer state ${which}.${r.name} is missing or has the wrong size`);
        this.rt.write((which === 'exp_avg' ? this.m : this.v).get(r.name)!, data);
      }
    }
    this.step = step;
  }
}
