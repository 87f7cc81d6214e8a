// Parameters and their gradients live in two arenas with the same layout (DeepSpeed's
// contiguous_gradients): each tensor gets a 256-byte-aligned slot in forward order, so a
// layer's parameters, a DDP bucket or a ZeRO partition is one contiguous range, and the
// optimizer and the gradient norm run over whole ranges in a few dispatches.
// Mixed precision (bf16, fp16) stores both at 2 bytes per element: a slot then holds 128
// elements instead of 64, and the optimizer lays its fp32 master weights and moments out in the
// same element layout (slotBytes), so one launch updates matching ranges of all of them. The slot
// rule (slotElems) lives in common/padding.ts, which the model-state predictions count with.
import { slotElems, slotElemsAt } from '../../common/padding.js';
import { Allocator, type Arena, elementBytes, type GpuTensor, viewOf } from '../gpu/allocator.js';
import { bytesPerElement, type StoragePrecision } from '../gpu/precision.js';
import type { Runtime } from '../gpu/runtime.js';
import { type GptConfig, type ParamSpec, paramSpecs } from './config.js';

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

/**
 * A gradient bucket of ZeRO-2's constant-size buffers: whole layers, consecutive in backward
 * order, whose gradients share one ring buffer with the bucket two places later.
 */
export interface GradBucket {
  index: number;
  /** the bucket's parameters, forward order */
  refs: ParamRef[];
  /** element range [start, end) of the flat layout */
  start: number;
  end: number;
  /** the region of the ring buffer holding this bucket's gradients */
  region: GpuTensor;
}

const firstElem = (rs: readonly ParamRef[]) => Math.min(...rs.map((r) => r.offset));
const endElem = (rs: readonly ParamRef[]) => Math.max(...rs.map((r) => r.offset + r.numel));
/** elements from a group's first parameter to the end of its last (0 for none) */
const span = (rs: readonly ParamRef[]) => (rs.length ? endElem(rs) - firstElem(rs) : 0);
const padded = (n: number, slot: number) => Math.ceil(n / slot) * slot;

/** A layer's or bucket's parameters (or gradients) as views of `buffer`, which holds them from the group's first element. */
function place(refs: ParamRef[], index: number, buffer: GpuTensor, which: 'param' | 'grad', region: string): GradBucket {
  const [start, end] = [firstElem(refs), endElem(refs)];
  for (const r of refs) r[which] = viewOf(buffer, which === 'param' ? r.name : `grad:${r.name}`, r.offset - start, r.numel);
  return { index, refs: [...refs].sort((a, b) => a.offset - b.offset), start, end, region: viewOf(buffer, region, 0, end - start) };
}

/** Layer of a parameter in backward order: 0 = head, 1..L = blocks L-1..0, L+1 = embedding. */
function backwardLayer(name: string, L: number): number {
  if (name.startsWith('transformer.ln_f.')) return 0;
  const m = /^transformer\.h\.(\d+)\./.exec(name);
  if (m) return L - Number(m[1]);
  return L + 1;
}

export interface ParamStoreOptions {
  /**
   * ZeRO-2: instead of a full gradient arena, keep gradients in two ring buffers of whole-layer
   * buckets of about this many bytes (plus a dedicated one for the embedding, whose tied weight
   * gets gradients at both ends of backward)
   */
  gradBucketBytes?: number;
  /** ZeRO-3: no full parameter arena; each layer's parameters are gathered into ring buffers */
  partitionParams?: boolean;
  /** the tensors of the whole model on this rank (tensor parallelism: local shards, same names and order) */
  specs?: ParamSpec[];
  /** pipeline stage: keep only the parameters this predicate accepts (forward order is kept) */
  owns?: (name: string) => boolean;
  /** storage of the weights and gradients: fp32, or mixed precision's 16-bit compute copy (default fp32) */
  precision?: StoragePrecision;
}

export class ParamStore {
  readonly refs: ParamRef[];
  readonly byName = new Map<string, ParamRef>();
  /** the full parameter arena; null when parameters are partitioned (ZeRO-3) */
  readonly paramArena: Arena | null;
  /** ZeRO-3: each layer's gathered parameters, forward order (0 = embedding .. L+1 = head) */
  readonly paramGroups: GradBucket[] = [];
  /** ZeRO-3: initial or loaded values of the whole flat layout, until the strategy takes its shard */
  hostValues: Float32Array | null = null;
  /** the full gradient arena; null when gradients live in constant-size bucket buffers (ZeRO-2) */
  readonly gradArena: Arena | null;
  /** ZeRO-2: gradient buckets in backward order (empty otherwise) */
  readonly gradBuckets: GradBucket[] = [];
  private readonly gradBuffers: GpuTensor[] = [];
  /** elements of the flat layout, padding included */
  readonly flatElems: number;
  /** parameters (Ψ) */
  readonly count: number;
  /** storage of the weights and gradients on the device */
  readonly precision: StoragePrecision;
  /** pipeline stage: the parameters this store keeps */
  readonly owns: (name: string) => boolean;

  constructor(
    private readonly rt: Runtime,
    readonly config: GptConfig,
    o: ParamStoreOptions = {},
  ) {
    const { gradBucketBytes, partitionParams = false } = o;
    const owns = (this.owns = o.owns ?? (() => true));
    const p = (this.precision = o.precision ?? 'fp32');
    const e = bytesPerElement(p);
    const specs = (o.specs ?? paramSpecs(config)).filter((s) => owns(s.name));
    const shapes = specs.map((s) => s.shape);
    const bytes = Allocator.arenaBytesFor(shapes, p);
    this.paramArena = partitionParams ? null : rt.allocator.arena('params', 'params', bytes);
    this.gradArena = gradBucketBytes === undefined ? rt.allocator.arena('grads', 'grads', bytes) : null;
    let offset = 0;
    const placeholderBuffer = rt.device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE });
    const placeholder = (name: string, category: 'params' | 'grads', numel: number, shape: readonly number[], at: number): GpuTensor => ({
      name,
      category,
      buffer: placeholderBuffer,
      byteOffset: at * e,
      byteLength: numel * e,
      numel,
      shape: [...shape],
      ...(p === 'fp32' ? {} : { precision: p }),
    });
    this.refs = specs.map((spec, index) => {
      const numelOf = spec.shape.reduce((a, b) => a * b, 1);
      const param = this.paramArena
        ? this.paramArena.alloc(spec.name, spec.shape, p)
        : placeholder(spec.name, 'params', numelOf, spec.shape, offset);
      const grad = this.gradArena
        ? this.gradArena.alloc(`grad:${spec.name}`, spec.shape, p)
        : placeholder(`grad:${spec.name}`, 'grads', numelOf, spec.shape, offset);
      const numel = param.numel;
      if (param.byteOffset !== offset * e || (this.gradArena && grad.byteOffset !== offset * e))
        throw new Error('parameter arena layout is not sequential');
      const ref: ParamRef = { index, name: spec.name, spec, shape: spec.shape, numel, offset, param, grad };
      offset += slotElems(numel, p);
      return ref;
    });
    for (const r of this.refs) this.byName.set(r.name, r);
    this.flatElems = offset;
    this.count = this.refs.reduce((s, r) => s + r.numel, 0);
    if (gradBucketBytes !== undefined) this.placeGradsInBuckets(gradBucketBytes);
    if (partitionParams) this.placeParamsInLayers();
  }

  /**
   * ZeRO-3's working set: the embedding's parameters get their own buffer (the tied wte is read
   * from the start of forward to the end of backward); blocks and the head alternate between
   * two ring buffers, so consecutive layers in forward or backward order never share one.
   */
  private placeParamsInLayers() {
    const L = this.config.n_layer;
    const byLayer: ParamRef[][] = Array.from({ length: L + 2 }, () => []);
    for (const r of this.refs) byLayer[L + 1 - backwardLayer(r.name, L)]!.push(r); // forward order
    // mixed precision: 16-bit buffers, padded to their 256-byte slots
    const [p, slot] = [this.precision, this.elemsPerSlot];
    const ringElems = Math.max(...byLayer.slice(1).map((rs) => padded(span(rs), slot)));
    const rings = [0, 1].map((i) => this.rt.allocator.tensor(`param-ring.${i}`, 'params', [ringElems], p));
    const embedding = this.rt.allocator.tensor('param-buffer.embedding', 'params', [padded(span(byLayer[0]!), slot)], p);
    byLayer.forEach((refs, layer) =>
      this.paramGroups.push(place(refs, layer, layer === 0 ? embedding : rings[layer % 2]!, 'param', `param-layer${layer}`)),
    );
  }

  private placeGradsInBuckets(capBytes: number) {
    const L = this.config.n_layer;
    const layers: ParamRef[][] = Array.from({ length: L + 2 }, () => []);
    for (const r of this.refs) layers[backwardLayer(r.name, L)]!.push(r);
    const groups: ParamRef[][] = [];
    let cur: ParamRef[] = [];
    for (let l = 0; l <= L; l++) {
      const next = [...cur, ...layers[l]!];
      if (cur.length > 0 && span(next) * bytesPerElement(this.precision) > capBytes) {
        groups.push(cur);
        cur = [...layers[l]!];
      } else cur = next;
    }
    if (cur.length) groups.push(cur);
    const embedding = layers[L + 1]!;
    // mixed precision: 16-bit buffers, padded to their 256-byte slots
    const [p, slot] = [this.precision, this.elemsPerSlot];
    const ringElems = Math.max(slot, ...groups.map((g) => padded(span(g), slot)));
    const rings = [0, 1]
      .slice(0, Math.min(2, groups.length))
      .map((i) => this.rt.allocator.tensor(`grad-bucket-ring.${i}`, 'comm', [ringElems], p));
    const dedicated = this.rt.allocator.tensor('grad-bucket.embedding', 'comm', [padded(span(embedding), slot)], p);
    this.gradBuffers.push(...rings, dedicated);
    [...groups, embedding].forEach((refs, index) =>
      this.gradBuckets.push(place(refs, index, index < groups.length ? rings[index % 2]! : dedicated, 'grad', `grad-bucket${index}`)),
    );
  }

  get(name: string): ParamRef {
    const r = this.byName.get(name);
    if (!r) throw new Error(`no parameter named ${name}`);
    return r;
  }

  /** Elements of one slot of the flat layout (256 bytes at the store's precision); the optimizer's fp32 arenas give each slot as many elements */
  get elemsPerSlot(): number {
    return slotElemsAt(this.precision);
  }

  /** Record zeroing every gradient (one clear of the whole arena, or of each bucket buffer). */
  zeroGrad() {
    if (!this.gradArena) {
      for (const b of this.gradBuffers) this.rt.clear(b);
      return;
    }
    const e = elementBytes(this.refs[0]!.grad);
    this.rt.clear({ ...this.refs[0]!.grad, byteOffset: 0, byteLength: this.flatElems * e, numel: this.flatElems, name: 'grads(all)' });
  }

  /** Write one parameter: to the device, or (ZeRO-3) into the host copy the strategy shards. */
  private setParam(r: ParamRef, data: Float32Array) {
    if (this.paramArena) {
      this.rt.write(r.param, data);
      return;
    }
    this.hostValues ??= new Float32Array(this.flatElems);
    this.hostValues.set(data, r.offset);
  }

  async readParams(): Promise<Map<string, Float32Array>> {
    if (!this.paramArena) throw new Error('parameters are partitioned (ZeRO-3): gather them through the strategy');
    return this.readAll('param');
  }

  async readGrads(): Promise<Map<string, Float32Array>> {
    return this.readAll('grad');
  }

  private async readAll(which: 'param' | 'grad'): Promise<Map<string, Float32Array>> {
    if (which === 'grad' && !this.gradArena)
      throw new Error('gradients live in bucket buffers (ZeRO-2): there is no full gradient to read');
    const base = which === 'param' ? this.refs[0]!.param : this.refs[0]!.grad;
    const flat = await this.rt.read({
      ...base,
      byteOffset: 0,
      byteLength: this.flatElems * elementBytes(base),
      numel: this.flatElems,
      name: `${which}s(all)`,
    });
    const out = new Map<string, Float32Array>();
    for (const r of this.refs) out.set(r.name, flat.slice(r.offset, r.offset + r.numel));
    return out;
  }

  writeParams(values: Map<string, Float32Array>) {
    for (const r of this.refs) {
      const v = values.get(r.name);
      if (!v) throw new Error(`missing parameter ${r.name}`);
      if (v.length !== r.numel)
        throw new Error(`parameter ${r.name} has ${v.length} values, expected ${r.numel} (shape ${r.shape.join('x')})`);
      this.setParam(r, v);
    }
  }
}
