// A data-parallel strategy's gradients and weights on the wire, at the run's precision. The
// strategies (workers/parallel/: dp, ddp, zero1/2/3) move element ranges [lo, hi) of the store's
// flat layout, split over the ranks by shard bounds; they write one path for every precision
// through this class: read a range, reduce or gather it, write back what comes. At fp32 a range
// travels as its float32 values, as they are. At bf16/fp16 it travels as its own 16-bit bits,
// packed without the 16-bit slots' padding (packed-wire.ts) and summed in f32 at every hop inside
// the collectives: half of fp32's bytes. Host-side sums widen the bits to float32 (exact).
import type { ProcessGroup } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import { decode16, encode16, type StoragePrecision } from '../gpu/precision.js';
import type { Runtime } from '../gpu/runtime.js';
import { PackedRanges, type Placed, wireDtypeOf } from './packed-wire.js';

/** A flat range's elements as they travel: float32 values (fp32) or 16-bit bits (bf16/fp16). */
export type Flat = Float32Array | Uint16Array;
type Labels = Record<string, string | number>;

export class FlatWire {
  /** the 16-bit format on the wire; null at fp32 */
  readonly dtype: 'float16' | 'bfloat16' | null;
  /** what a collective's options add for this wire: its 16-bit dtype, or nothing at fp32 */
  readonly typed: { dtype?: 'float16' | 'bfloat16' };
  private readonly packed: PackedRanges;

  constructor(
    private readonly rt: Runtime,
    private readonly store: { precision: StoragePrecision; refs: readonly Placed[] },
  ) {
    this.dtype = wireDtypeOf(store);
    this.typed = this.dtype ? { dtype: this.dtype } : {};
    this.packed = new PackedRanges(store.refs);
  }

  /** `numel` elements of a device tensor from element `offset`, as they travel. */
  read(t: GpuTensor, numel = t.numel, offset = 0): Promise<Flat> {
    if (numel === 0) return Promise.resolve(this.alloc(0));
    return this.dtype ? this.rt.readBits(t, numel, offset) : this.rt.read(t, numel, offset);
  }

  /** The whole of `t`, which holds the flat range [lo, hi), packed into `into`'s first count(lo, hi) elements (fp32: read straight into it). */
  async readInto(t: GpuTensor, lo: number, hi: number, into: Flat): Promise<Flat> {
    if (!this.dtype) return this.rt.read(t, t.numel, 0, into as Float32Array);
    const packed = this.pack(await this.rt.readBits(t), lo, hi);
    into.set(packed);
    return into.subarray(0, packed.length);
  }

  alloc(n: number): Flat {
    return this.dtype ? new Uint16Array(n) : new Float32Array(n);
  }

  /** Elements the flat range [lo, hi) puts on the wire. */
  count(lo: number, hi: number): number {
    return this.dtype ? this.packed.count(lo, hi) : Math.max(0, hi - lo);
  }

  /** What each rank r's block of [lo, hi) puts on the wire: the part inside [bounds[r], bounds[r + 1]) (a collective's counts). */
  counts(lo: number, hi: number, bounds: readonly number[]): number[] {
    return bounds.slice(0, -1).map((b, r) => this.count(Math.max(lo, b), Math.min(hi, bounds[r + 1]!)));
  }

  /** `data`, the flat range [lo, hi), as it goes on the wire. */
  pack(data: Flat, lo: number, hi: number): Flat {
    return this.dtype ? this.packed.pack(data as Uint16Array, lo, hi) : data;
  }

  /** What came off the wire for [lo, hi), back in the flat layout (16-bit padding: zeros). */
  unpack(data: Flat, lo: number, hi: number): Flat {
    return this.dtype ? this.packed.unpack(data as Uint16Array, lo, hi) : data;
  }

  /** float32 values for host arithmetic (fp32: `x` itself). */
  widen(x: Flat): Float32Array {
    return this.dtype ? decode16(this.store.precision, x as Uint16Array) : (x as Float32Array);
  }

  /** float32 values in the wire's format (fp32: `x` itself; 16-bit: rounded to nearest even). */
  narrow(x: Float32Array): Flat {
    return this.dtype ? encode16(this.store.precision, x) : x;
  }

  /** Sums `data` (the flat range [lo, hi)) over the group; rank r receives its block (counts), returned in the flat layout. */
  async reduceScatter(pg: ProcessGroup, data: Flat, lo: number, hi: number, bounds: readonly number[], labels: Labels): Promise<Flat> {
    const o = { op: 'sum' as const, counts: this.counts(lo, hi, bounds), labels, ...this.typed };
    const mine = await pg.reduceScatter(this.pack(data, lo, hi), o).wait();
    const [x, y] = [Math.max(lo, bounds[pg.rank]!), Math.min(hi, bounds[pg.rank + 1]!)];
    return y > x ? this.unpack(mine, x, y) : this.alloc(0);
  }

  /** Every rank's block of [lo, hi) (`own`: this rank's, in the flat layout), the whole range returned in the flat layout. */
  async allGather(pg: ProcessGroup, own: Flat, lo: number, hi: number, bounds: readonly number[], labels: Labels): Promise<Flat> {
    const [x, y] = [Math.max(lo, bounds[pg.rank]!), Math.min(hi, bounds[pg.rank + 1]!)];
    const full = await pg.allGather(this.pack(own, x, y), { counts: this.counts(lo, hi, bounds), labels, ...this.typed }).wait();
    return this.unpack(full, lo, hi);
  }

  /** A buffer of `n` wire elements followed by one float32 (the parameter server's weights and the gradient norm, one message). */
  withFloat(n: number): { buf: Flat; payload: Flat; float: DataView } {
    const buf = this.dtype ? new Uint16Array(n + 2) : new Float32Array(n + 1);
    return { buf, payload: buf.subarray(0, n), float: new DataView(buf.buffer, n * buf.BYTES_PER_ELEMENT, 4) };
  }
}
