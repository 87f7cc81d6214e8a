// Parameters and their gradients live in two arenas with the same layout (DeepSpeed's
// contiguous_gradients): each tensor gets a 256-byte-aligned slot in forward order, so a
// layer's parameters, a DDP bucket or a ZeRO partition is one contiguous range, and the
// optimizer and the gradient norm run over whole ranges in a few dispatches.
import { Allocator, type Arena, type GpuTensor, SLICE_ALIGN } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import { type GptConfig, type ParamSpec, paramSpecs } from './config.js';
import { Rng } from './rng.js';

export interface ParamRef {
  /** position in forward order */
  index: number;
  name: string;
  spec: ParamSpec;
  shape: readonly number[];
  numel: number;
  /** element offset of the slot in the flat layout (a multiple of 64) */
  offset: number;
  param: GpuTensor;
  grad: GpuTensor;
}

export const SLOT_ELEMS = SLICE_ALIGN / 4;

export function slotElems(numel: number): number {
  return Math.max(SLOT_ELEMS, Math.ceil(numel / SLOT_ELEMS) * SLOT_ELEMS);
}

export class ParamStore {
  readonly refs: ParamRef[];
  readonly byName = new Map<string, ParamRef>();
  readonly paramArena: Arena;
  readonly gradArena: Arena;
  /** elements of the flat layout, padding included */
  readonly flatElems: number;
  /** parameters (Ψ) */
  readonly count: number;

  constructor(
    private readonly rt: Runtime,
    readonly config: GptConfig,
  ) {
    const specs = paramSpecs(config);
    const shapes = specs.map((s) => s.shape);
    const bytes = Allocator.arenaBytesFor(shapes);
    this.paramArena = rt.allocator.arena('params', 'params', bytes);
    this.gradArena = rt.allocator.arena('grads', 'grads', bytes);
    let offset = 0;
    this.refs = specs.map((spec, index) => {
      const param = this.paramArena.alloc(spec.name, spec.shape);
      const grad = this.gradArena.alloc(`grad:${spec.name}`, spec.shape);
      const numel = param.numel;
      if (param.byteOffset !== offset * 4 || grad.byteOffset !== offset * 4) throw new Error('parameter arena layout is not sequential');
      const ref: ParamRef = { index, name: spec.name, spec, shape: spec.shape, numel, offset, param, grad };
      offset += slotElems(numel);
      return ref;
    });
    for (const r of this.refs) this.byName.set(r.name, r);
    this.flatElems = offset;
    this.count = this.refs.reduce((s, r) => s + r.numel, 0);
  }

  get(name: string): ParamRef {
    const r = this.byName.get(name);
    if (!r) throw new Error(`no parameter named ${name}`);
    return r;
  }

  /** GPT-2 init from nanoGPT: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), layernorm 1/0, biases 0. */
  initialize(seed: number) {
    const rng = new Rng(seed);
    for (const r of this.refs) {
      const data = new Float32Array(r.numel);
      const init = r.spec.init;
      if (init.kind === 'normal') for (let i = 0; i < data.length; i++) data[i] = rng.normal() * init.std;
      else data.fill(init.value);
      this.rt.write(r.param, data);
    }
  }

  /** Record zeroing every gradient (one clear of the whole arena). */
  zeroGrad() {
    this.rt.clear({ ...this.refs[0]!.grad, byteOffset: 0, byteLength: this.flatElems * 4, numel: this.flatElems, name: 'grads(all)' });
  }

  async readParams(): Promise<Map<string, Float32Array>> {
    return this.readAll('param');
  }

  async readGrads(): Promise<Map<string, Float32Array>> {
    return this.readAll('grad');
  }

  private async readAll(which: 'param' | 'grad'): Promise<Map<string, Float32Array>> {
    const base = which === 'param' ? this.refs[0]!.param : this.refs[0]!.grad;
    const flat = await this.rt.read({ ...base, byteOffset: 0, byteLength: this.flatElems * 4, numel: this.flatElems, name: `${which}s(all)` });
    const out = new Map<string, Float32Array>();
    for (const r of this.refs) out.set(r.name, flat.slice(r.offset, r.offset + r.numel));
    return out;
  }

  writeParams(values: Map<string, Float32Array>) {
    for (const r of this.refs) {
      const v = values.get(r.name);
      if (!v) throw new Error(`missing parameter ${r.name}`);
      if (v.length !== r.numel) throw new Error(`parameter ${r.name} has ${v.length} values, expected ${r.numel} (shape ${r.shape.join('x')})`);
      this.rt.write(r.param, v);
    }
  }
}
