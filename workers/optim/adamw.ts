// AdamW with PyTorch's semantics (decoupled weight decay, bias-corrected moments) and
// global gradient-norm clipping, entirely on the device: the squared norm is reduced into a
// one-float buffer that the update kernel reads, so a step needs no readback.
// m and v sit in two arenas laid out like the parameters, so one launch covers each run of
// consecutive parameters that share a weight-decay setting (nanoGPT: decay matrices and
// embeddings, not biases or layernorm).
import { Allocator, type Arena, type GpuTensor, viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { adamw, type AdamwHyper } from '../kernels/adamw.js';
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

/** Record the update of every run at AdamW step t (decay only where the run takes it). */
export function recordAdamwRuns(rt: Runtime, runs: readonly AdamwRun[], c: AdamwConfig, t: number, lr: number) {
  for (const r of runs) {
    r.kernel.set({
      lr,
      beta1: c.beta1,
      beta2: c.beta2,
      eps: c.eps,
      weightDecay: r.decay ? c.weightDecay : 0,
      step: t,
      maxGradNorm: c.maxGradNorm,
    });
    rt.run(r.kernel.dispatches);
  }
}

export class AdamW {
  readonly mArena: Arena;
  readonly vArena: Arena;
  readonly m = new Map<string, GpuTensor>();
  readonly v = new Map<string, GpuTensor>();
  /** squared global gradient norm (1) */
  readonly gradSumSq: GpuTensor;
  /** optimizer steps taken (t of the bias correction) */
  step = 0;
  private readonly runs: AdamwRun[] = [];
  private readonly normKernel: Dispatch[];

  constructor(
    private readonly rt: Runtime,
    private readonly store: ParamStore,
    readonly config: AdamwConfig,
  ) {
    const shapes = store.refs.map((r) => r.shape);
    const bytes = Allocator.arenaBytesFor(shapes);
    this.mArena = rt.allocator.arena('adam.exp_avg', 'optimizer', bytes);
    this.vArena = rt.allocator.arena('adam.exp_avg_sq', 'optimizer', bytes);
    for (const r of store.refs) {
      this.m.set(r.name, this.mArena.alloc(`exp_avg.${r.name}`, r.shape));
      this.v.set(r.name, this.vArena.alloc(`exp_avg_sq.${r.name}`, r.shape));
    }
    this.gradSumSq = rt.allocator.tensor('grad_norm_sq', 'workspace', [1]);
    const gradBase = store.refs[0]!.grad;
    this.normKernel = sumSquares(rt, { out: this.gradSumSq, inp: viewOf(gradBase, 'grads(all)', 0, store.flatElems), n: store.flatElems });

    // runs of consecutive parameters with the same decay flag; a run spans the padding between slots
    let i = 0;
    const refs = store.refs;
    while (i < refs.length) {
      const first = refs[i]!;
      let j = i;
      while (j < refs.length && refs[j]!.spec.decay === first.spec.decay) j++;
      const last = refs[j - 1]!;
      const elems = last.offset + last.numel - first.offset;
      const view = (t: GpuTensor, tag: string) => viewOf(t, `${tag}[${first.name}+${j - i}]`, 0, elems);
      const kernel = adamw(rt, {
        params: view(first.param, 'p'),
        grads: view(first.grad, 'g'),
        m: view(this.m.get(first.name)!, 'm'),
        v: view(this.v.get(first.name)!, 'v'),
        n: elems,
        gradSumSq: this.gradSumSq,
      });
      this.runs.push({ decay: first.spec.decay, kernel });
      i = j;
    }
  }

  /** Record the squared global gradient norm into gradSumSq (local gradients). */
  recordGradNorm() {
    this.rt.run(this.normKernel);
  }

  /** Record one update with learning rate lr (after recordGradNorm, or after the strategy filled gradSumSq). */
  recordStep(lr: number) {
    this.step += 1;
    recordAdamwRuns(this.rt, this.runs, this.config, this.step, lr);
  }

  async readGradNorm(): Promise<number> {
    return Math.sqrt((await this.rt.read(this.gradSumSq))[0]!);
  }

  async readState(): Promise<{ m: Map<string, Float32Array>; v: Map<string, Float32Array> }> {
    const read = async (tensors: Map<string, GpuTensor>) => {
      const first = tensors.get(this.store.refs[0]!.name)!;
      const flat = await this.rt.read(viewOf(first, 'all', 0, this.store.flatElems));
      const out = new Map<string, Float32Array>();
      for (const r of this.store.refs) out.set(r.name, flat.slice(r.offset, r.offset + r.numel));
      return out;
    };
    return { m: await read(this.m), v: await read(this.v) };
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
