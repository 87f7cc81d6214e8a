// What a 16-bit flat range carries on the wire: the parameters' own elements, not the padding of
// their slots. A slot is 256 bytes (the device's binding alignment): 64 fp32 elements but 128
// 16-bit ones, so at 16 bits a small tensor (tiny's 64-element biases and layernorms) pads to
// twice its size, ~1% of tiny's flat layout, all of it zeros. The strategies pack a range before
// a collective and unpack what comes back (padding stays zero), so a 16-bit run moves half of
// fp32's bytes. Pure host code: ranges are element ranges [lo, hi) of the flat layout.

/** A store's 16-bit format on the wire (mixed precision: its gradients and weights travel as their own bits), or null at fp32. */
export function wireDtypeOf(store: { precision: string }): 'float16' | 'bfloat16' | null {
  return store.precision === 'fp16' ? 'float16' : store.precision === 'bf16' ? 'bfloat16' : null;
}

/** The parameters' places in the flat layout (ParamRef's offset and numel). */
export interface Placed {
  offset: number;
  numel: number;
}

export class PackedRanges {
  private readonly segs: readonly Placed[];

  constructor(refs: readonly Placed[]) {
    this.segs = [...refs].sort((a, b) => a.offset - b.offset);
  }

  /** The parameters' pieces inside [lo, hi), as [from, to) flat positions. */
  private pieces(lo: number, hi: number): [number, number][] {
    const out: [number, number][] = [];
    for (const r of this.segs) {
      const a = Math.max(lo, r.offset);
      const b = Math.min(hi, r.offset + r.numel);
      if (b > a) out.push([a, b]);
    }
    return out;
  }

  /** Parameter elements inside [lo, hi) (what the packed range holds). */
  count(lo: number, hi: number): number {
    return this.pieces(lo, hi).reduce((s, [a, b]) => s + b - a, 0);
  }

  /** Elements each of the blocks [bounds[r], bounds[r + 1]) holds once packed (a collective's counts). */
  counts(bounds: readonly number[]): number[] {
    return bounds.slice(0, -1).map((lo, r) => this.count(lo, bounds[r + 1]!));
  }

  /** The parameter elements of `src`, which holds the flat range [lo, hi) (src[0] = element lo). */
  pack(src: Uint16Array, lo: number, hi: number): Uint16Array {
    const out = new Uint16Array(this.count(lo, hi));
    let k = 0;
    for (const [a, b] of this.pieces(lo, hi)) {
      out.set(src.subarray(a - lo, b - lo), k);
      k += b - a;
    }
    return out;
  }

  /** A packed range [lo, hi) back in the flat layout: into `dst` (dst[0] = element lo; the padding is left as it is, zeros when new). */
  unpack(packed: Uint16Array, lo: number, hi: number, dst: Uint16Array = new Uint16Array(hi - lo)): Uint16Array {
    let k = 0;
    for (const [a, b] of this.pieces(lo, hi)) {
      dst.set(packed.subarray(k, k + b - a), a - lo);
      k += b - a;
    }
    if (k !== packed.length) throw new Error(`unpack of [${lo}, ${hi}): ${packed.length} packed elements, the range holds ${k}`);
    return dst;
  }
}
