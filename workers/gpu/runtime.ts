// The device boundary, kept small (tinygrad's habit): allocate with a category (Allocator),
// write, read, compile, dispatch. Kernels are prepared once (pipeline + bind group + uniform
// buffer) and replayed every step; everything recorded between two flushes goes to the GPU
// as one command buffer with consecutive dispatches in one compute pass, so a training step
// costs a handful of submits and exactly one readback (the loss).
import { Allocator, elementBytes, type GpuTensor, precisionOf } from './allocator.js';
import type { OpenedDevice } from './device.js';
import type { EmulatedClock } from './emulated-clock.js';
import { decode16, encode16 } from './precision.js';

export type Workgroups = readonly [number, number?, number?];

/** One prepared kernel launch: replay it with Runtime.run; change its uniforms with setParams. */
export class Dispatch {
  constructor(
    readonly label: string,
    readonly pipeline: GPUComputePipeline,
    readonly bindGroup: GPUBindGroup,
    public workgroups: [number, number, number],
    private readonly uniform: GPUBuffer | null,
    private readonly queue: GPUQueue,
    private readonly flushPending: () => void,
  ) {}

  /** New uniform values for launches recorded from now on (earlier ones are flushed first). */
  setParams(params: ArrayBuffer | ArrayBufferView) {
    if (!this.uniform) throw new Error(`kernel ${this.label} has no uniform parameters`);
    this.flushPending();
    const view = ArrayBuffer.isView(params) ? params : new Uint8Array(params);
    this.queue.writeBuffer(this.uniform, 0, view.buffer, view.byteOffset, view.byteLength);
  }
}

type Command =
  | { kind: 'dispatch'; d: Dispatch }
  | { kind: 'copy'; src: GpuTensor; srcOffset: number; dst: GpuTensor; dstOffset: number; bytes: number }
  | { kind: 'clear'; t: GpuTensor };

/** Uniform parameters: integers as u32 (or i32 when negative), `{ f32: x }` as float32. */
export function packParams(values: readonly (number | { f32: number })[]): ArrayBuffer {
  const n = Math.max(4, Math.ceil(values.length / 4) * 4); // 16-byte uniform blocks
  const buf = new ArrayBuffer(n * 4);
  const dv = new DataView(buf);
  values.forEach((v, i) => {
    if (typeof v === 'number') {
      if (!Number.isInteger(v)) throw new Error(`uniform ${i} = ${v} is not an integer; pass { f32: ${v} }`);
      if (v < 0) dv.setInt32(i * 4, v, true);
      else dv.setUint32(i * 4, v, true);
    } else dv.setFloat32(i * 4, v.f32, true);
  });
  return buf;
}

export class Runtime {
  readonly device: GPUDevice;
  readonly allocator: Allocator;
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private pending: Command[] = [];
  /** dispatches submitted since creation (for benchmarks and telemetry) */
  dispatchCount = 0;
  submitCount = 0;
  /**
   * An emulated device's timeline (benchmarks: workers/gpu/emulated-device.ts). Reads and syncs then
   * also wait until the emulated device reaches the point where they were issued.
   */
  emulated: EmulatedClock | null = null;

  /**
   * The device has `shader-f16` (device.ts requests it where the adapter offers it): fp16 kernels
   * then compute on native f16 storage (source.ts); elsewhere they unpack 16-bit values stored
   * two per u32. Set false to take the packed path on such a device (tests compare both).
   */
  shaderF16: boolean;

  constructor(readonly opened: OpenedDevice) {
    this.device = opened.device;
    this.allocator = new Allocator(opened.device);
    this.shaderF16 = opened.device.features.has('shader-f16');
  }

  get limits() {
    return this.device.limits;
  }

  /** Compile (once per source and entry point) a compute pipeline. */
  compile(label: string, code: string, entryPoint = 'main'): GPUComputePipeline {
    const key = `${entryPoint}\n${code}`;
    let p = this.pipelines.get(key);
    if (!p) {
      const module = this.device.createShaderModule({ label, code });
      p = this.device.createComputePipeline({ label, layout: 'auto', compute: { module, entryPoint } });
      this.pipelines.set(key, p);
    }
    return p;
  }

  /** Await compilation errors of everything compiled so far (tests call this). */
  async checkErrors(): Promise<void> {
    this.device.pushErrorScope('validation');
    this.device.pushErrorScope('internal');
    const internal = await this.device.popErrorScope();
    const validation = await this.device.popErrorScope();
    const e = internal ?? validation;
    if (e) throw new Error(`WebGPU error: ${e.message}`);
  }

  /**
   * Prepare a launch. Storage tensors bind at 0..n-1 in order, the uniform block (if any) at n.
   * Every binding must be used by the shader (pipelines use layout 'auto').
   */
  prepare(
    label: string,
    pipeline: GPUComputePipeline,
    storage: readonly GpuTensor[],
    params: ArrayBuffer | null,
    workgroups: Workgroups,
  ): Dispatch {
    const entries: GPUBindGroupEntry[] = storage.map((t, i) => ({
      binding: i,
      resource: { buffer: t.buffer, offset: t.byteOffset, size: Math.max(4, t.byteLength) },
    }));
    let uniform: GPUBuffer | null = null;
    if (params) {
      uniform = this.device.createBuffer({
        label: `${label}.params`,
        size: params.byteLength,
        usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      });
      this.device.queue.writeBuffer(uniform, 0, params);
      entries.push({ binding: storage.length, resource: { buffer: uniform } });
    }
    const bindGroup = this.device.createBindGroup({ label, layout: pipeline.getBindGroupLayout(0), entries });
    const wg = this.fitWorkgroups(label, workgroups);
    return new Dispatch(label, pipeline, bindGroup, wg, uniform, this.device.queue, () => this.flush());
  }

  private fitWorkgroups(label: string, w: Workgroups): [number, number, number] {
    const max = Number(this.device.limits.maxComputeWorkgroupsPerDimension);
    const out: [number, number, number] = [Math.max(1, w[0]), Math.max(1, w[1] ?? 1), Math.max(1, w[2] ?? 1)];
    for (const n of out) {
      if (n > max) throw new Error(`kernel ${label} needs ${n} workgroups in one dimension; this adapter allows ${max}`);
    }
    return out;
  }

  /** Record launches; they run at the next flush, in order. */
  run(d: Dispatch | readonly Dispatch[]) {
    if (Array.isArray(d)) for (const x of d) this.pending.push({ kind: 'dispatch', d: x });
    else this.pending.push({ kind: 'dispatch', d: d as Dispatch });
  }

  /** Record a buffer copy (bytes default to src's length). */
  copy(src: GpuTensor, dst: GpuTensor, bytes = src.byteLength, srcOffset = 0, dstOffset = 0) {
    if (srcOffset + bytes > src.byteLength || dstOffset + bytes > dst.byteLength) {
      throw new Error(`copy of ${bytes} bytes from ${src.name} to ${dst.name} is out of bounds`);
    }
    this.pending.push({ kind: 'copy', src, srcOffset, dst, dstOffset, bytes });
  }

  /** Record zeroing a tensor. */
  clear(t: GpuTensor) {
    this.pending.push({ kind: 'clear', t });
  }

  /** Submit everything recorded so far as one command buffer. */
  flush() {
    if (this.pending.length === 0) return;
    const enc = this.device.createCommandEncoder();
    let pass: GPUComputePassEncoder | null = null;
    for (const c of this.pending) {
      if (c.kind === 'dispatch') {
        if (!pass) pass = enc.beginComputePass();
        pass.setPipeline(c.d.pipeline);
        pass.setBindGroup(0, c.d.bindGroup);
        pass.dispatchWorkgroups(...c.d.workgroups);
        this.dispatchCount++;
        continue;
      }
      if (pass) {
        pass.end();
        pass = null;
      }
      if (c.kind === 'copy') {
        enc.copyBufferToBuffer(
          c.src.buffer,
          c.src.byteOffset + c.srcOffset,
          c.dst.buffer,
          c.dst.byteOffset + c.dstOffset,
          alignCopy(c.bytes),
        );
      } else {
        enc.clearBuffer(c.t.buffer, c.t.byteOffset, alignCopy(c.t.byteLength));
      }
    }
    if (pass) pass.end();
    this.pending = [];
    this.device.queue.submit([enc.finish()]);
    this.submitCount++;
  }

  /** Wait until the GPU finished everything submitted. */
  async sync() {
    const [until, issued] = [this.emulated?.end, this.emulated?.now()];
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    if (this.emulated) await this.emulated.reach(until!, issued!);
  }

  /**
   * Upload host data into a tensor (at an element offset). Ordered after earlier flushes. A 16-bit
   * tensor (precision.ts) takes its bits as a Uint16Array, or float values, which are rounded to
   * its format (nearest even); its offset and length must be even (4-byte copies).
   */
  write(t: GpuTensor, data: Float32Array | Uint32Array | Int32Array | Uint16Array, elemOffset = 0) {
    const p = precisionOf(t);
    let bytes: Float32Array | Uint32Array | Int32Array | Uint16Array = data;
    if (p !== 'fp32') {
      if (data instanceof Uint32Array || data instanceof Int32Array)
        throw new Error(`write into ${t.name} (${p}): pass float values or their 16-bit encodings (Uint16Array), not 32-bit integers`);
      if (data instanceof Float32Array) bytes = encode16(p, data);
      if (elemOffset % 2 !== 0 || bytes.length % 2 !== 0)
        throw new Error(
          `write of ${bytes.length} ${p} elements at ${elemOffset} into ${t.name}: offset and length must be even (4-byte copies)`,
        );
    } else if (data instanceof Uint16Array) throw new Error(`write of 16-bit values into ${t.name}, an fp32 tensor: pass a Float32Array`);
    const e = elementBytes(t);
    if ((elemOffset + bytes.length) * e > t.byteLength) {
      throw new Error(`write of ${bytes.length} elements at ${elemOffset} overflows ${t.name} (${t.numel} elements)`);
    }
    this.flush();
    this.device.queue.writeBuffer(t.buffer, t.byteOffset + elemOffset * e, bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The 16-bit encodings held by a bf16 or fp16 tensor (`numel` from `elemOffset`, an even offset). */
  async readBits(t: GpuTensor, numel = t.numel, elemOffset = 0): Promise<Uint16Array> {
    if (precisionOf(t) === 'fp32') throw new Error(`readBits: ${t.name} is fp32; use read`);
    if (elemOffset % 2 !== 0) throw new Error(`readBits of ${t.name} at element ${elemOffset}: the offset must be even (4-byte copies)`);
    const words = await this.readBytes(t, numel * 2, elemOffset * 2);
    return new Uint16Array(words, 0, numel);
  }

  private async readBytes(t: GpuTensor, bytes: number, byteOffset: number): Promise<ArrayBuffer> {
    if (bytes === 0) return new ArrayBuffer(0);
    const [until, issued] = [this.emulated?.end, this.emulated?.now()];
    const size = alignCopy(bytes);
    const staging = this.device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.flush();
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(t.buffer, t.byteOffset + byteOffset, staging, 0, size);
    this.device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = staging.getMappedRange().slice(0, size);
    staging.unmap();
    staging.destroy();
    if (this.emulated) await this.emulated.reach(until!, issued!);
    return out;
  }

  /**
   * Read a tensor (or `numel` elements from `elemOffset`) back to the host: into `into` when
   * given (its first `numel` elements; e.g. a registered buffer the collectives reduce in
   * place), else into a new array.
   */
  async read(t: GpuTensor, numel = t.numel, elemOffset = 0, into?: Float32Array): Promise<Float32Array> {
    const p = precisionOf(t);
    if (p !== 'fp32') {
      // 16-bit values widen exactly to float32
      const values = decode16(p, await this.readBits(t, numel, elemOffset));
      if (!into) return values;
      if (into.length < numel) throw new Error(`read of ${numel} elements of ${t.name} into a ${into.length}-element array`);
      into.set(values);
      return into.subarray(0, numel);
    }
    const bytes = numel * 4;
    if (into && into.length < numel) throw new Error(`read of ${numel} elements of ${t.name} into a ${into.length}-element array`);
    if (bytes === 0) return into ? into.subarray(0, 0) : new Float32Array(0);
    const [until, issued] = [this.emulated?.end, this.emulated?.now()];
    const size = alignCopy(bytes);
    const staging = this.device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.flush();
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(t.buffer, t.byteOffset + elemOffset * 4, staging, 0, size);
    this.device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    let out: Float32Array;
    if (into) {
      out = into.subarray(0, numel);
      out.set(new Float32Array(staging.getMappedRange(), 0, numel));
    } else out = new Float32Array(staging.getMappedRange().slice(0, bytes));
    staging.unmap();
    staging.destroy();
    if (this.emulated) await this.emulated.reach(until!, issued!);
    return out;
  }

  destroy() {
    this.allocator.destroyAll();
    this.device.destroy();
  }
}

function alignCopy(bytes: number) {
  return Math.ceil(bytes / 4) * 4;
}
