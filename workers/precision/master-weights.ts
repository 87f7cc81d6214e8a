// Mixed precision's fp32 master weights on their way into a data-parallel strategy. rank-weights.ts
// hands the strategy the whole model's master (its loadMasterWeights) before setup; the strategy
// keeps it flat, in the store's layout, until setup shares rank 0's (dp, ddp, zero1: a broadcast;
// zero3: every rank loaded the same) and gives its optimizer its part; the 16-bit weights are cast
// from it. flatten and split are the store's layout both ways (fp32 tensors by parameter name).
import type { ProcessGroup } from '../comm/index.js';
import type { Placed } from './packed-wire.js';

/** A store's flat layout: its parameters' names and places, and its length with padding. */
export interface FlatLayout {
  flatElems: number;
  refs: readonly (Placed & { name: string })[];
}

/** Tensors by name into one flat array in the layout (padding zeros). */
export function flatten(layout: FlatLayout, values: ReadonlyMap<string, Float32Array>): Float32Array {
  const flat = new Float32Array(layout.flatElems);
  for (const r of layout.refs) flat.set(values.get(r.name)!, r.offset);
  return flat;
}

/** A flat array back into tensors by name (copies). */
export function split(layout: FlatLayout, flat: Float32Array): Map<string, Float32Array> {
  return new Map(layout.refs.map((r) => [r.name, flat.slice(r.offset, r.offset + r.numel)]));
}

export class PendingMaster {
  private flat: Float32Array | null = null;

  constructor(
    private readonly layout: FlatLayout,
    /** the strategy's name, for the error of a run that set up without its master */
    private readonly who: string,
  ) {}

  /** loadMasterWeights: the whole model's fp32 master, this rank's layout */
  load(values: ReadonlyMap<string, Float32Array>) {
    this.flat = flatten(this.layout, values);
  }

  /** The loaded master (flat), handed over once. */
  take(): Float32Array {
    const flat = this.flat;
    if (!flat) throw new Error(`${this.who}: a mixed-precision run starts from master weights (loadMasterWeights) before setup`);
    this.flat = null;
    return flat;
  }

  /** Rank 0's master on every rank (a broadcast), handed over once. */
  async broadcast(pg: ProcessGroup, labels: Record<string, number> = {}): Promise<Float32Array> {
    const flat = this.take();
    await pg.broadcast(flat, { root: 0, labels: { what: 'initial master weights', ...labels } }).wait();
    return flat;
  }
}
