// DDP's gradient buckets on the wire of an emulated shape (benchmarks: emulated-device.ts). A
// small proxy model computes while the emulated device times a larger shape; for the bytes moved
// and their time to be the shape's too, each bucket's all-reduce sends `scale` times its real
// length: the real gradients, then zeros. Every rank's padding is zeros, so the sum keeps it
// zeros and the gradients come back unchanged. The strategy never sees the padding: it calls
// allReduce on the group this returns as on any other.
import { type AllReduceOptions, memAlloc, type ProcessGroup, type Tensor, type Work } from '../comm/index.js';

/** `pg` with each allReduce padded to `scale` times its length (scale <= 1: `pg` itself). */
export function paddedAllReduce(pg: ProcessGroup, scale: number): ProcessGroup {
  if (!(scale > 1)) return pg;
  // a padded buffer per bucket, kept across steps (its padding stays zeros); buckets are in flight together
  const buffers = new Map<string, Tensor>();
  const wireOf = (buf: Tensor, key: string | undefined): Tensor => {
    const n = Math.round(buf.length * scale);
    const kept = key === undefined ? undefined : buffers.get(key);
    if (kept && kept.length === n && kept.constructor === buf.constructor) return kept;
    const made = buf instanceof Float32Array ? memAlloc(n) : new Uint16Array(n);
    if (key !== undefined) buffers.set(key, made);
    return made;
  };
  const allReduce = <T extends Tensor>(buf: T, o: AllReduceOptions = {}): Work<T> => {
    const bucket = o.labels?.bucket;
    const wire = wireOf(buf, bucket === undefined ? undefined : String(bucket)) as T;
    wire.set(buf);
    return pg.allReduce(wire, o).map(() => {
      buf.set(wire.subarray(0, buf.length));
      return buf;
    });
  };
  return new Proxy(pg, {
    get(target, key) {
      if (key === 'allReduce') return allReduce;
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
