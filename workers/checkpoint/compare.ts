// Two checkpoints of one model, tensor by tensor: the weights, AdamW's two moments and its step
// count, element by element. Bit-exact means every float32 is the same bits (a -0 is not a +0, a
// NaN matches only the same NaN), which is what a resume in another layout must keep: the state
// loaded in layout B and gathered straight back to the usual layout equals the source's
// (workers/checkpoint/at-load.ts writes it). maxAbs says by how much a pair differs where not.
import { loadCheckpoint, type TensorMap } from './checkpoint.js';

export interface TensorDiff {
  /** "params.NAME", "exp_avg.NAME" or "exp_avg_sq.NAME" */
  name: string;
  elements: number;
  /** elements whose bits differ */
  differing: number;
  /** largest |a - b| (0 when bit-exact) */
  maxAbs: number;
}

export interface CheckpointDiff {
  /** every tensor and the optimizer step equal bit for bit */
  exact: boolean;
  /** the moments alone (exp_avg, exp_avg_sq) equal bit for bit */
  momentsExact: boolean;
  /** largest |a - b| over the moments */
  momentsMaxAbs: number;
  paramsMaxAbs: number;
  optimizerStep: [number, number];
  /** the tensors that differ (empty when exact) */
  differing: TensorDiff[];
  tensors: number;
}

function diffMaps(prefix: string, a: TensorMap, b: TensorMap): TensorDiff[] {
  const names = new Set([...a.keys(), ...b.keys()]);
  return [...names].map((n) => {
    const x = a.get(n)?.data;
    const y = b.get(n)?.data;
    if (!x || !y || x.length !== y.length)
      return { name: `${prefix}.${n}`, elements: Math.max(x?.length ?? 0, y?.length ?? 0), differing: Infinity, maxAbs: Infinity };
    const xb = new Uint32Array(x.buffer, x.byteOffset, x.length);
    const yb = new Uint32Array(y.buffer, y.byteOffset, y.length);
    let differing = 0;
    let maxAbs = 0;
    for (let i = 0; i < x.length; i++) {
      if (xb[i] === yb[i]) continue;
      differing++;
      const d = Math.abs(x[i]! - y[i]!);
      maxAbs = Number.isNaN(d) ? Infinity : Math.max(maxAbs, d);
    }
    return { name: `${prefix}.${n}`, elements: x.length, differing, maxAbs };
  });
}

/** Compares checkpoint folders `a` and `b` (each checkpoints/step-N with its manifest). */
export function compareCheckpoints(a: string, b: string): CheckpointDiff {
  const [ca, cb] = [loadCheckpoint(a), loadCheckpoint(b)];
  const params = diffMaps('params', ca.params, cb.params);
  const moments = [...diffMaps('exp_avg', ca.optimizer!.m, cb.optimizer!.m), ...diffMaps('exp_avg_sq', ca.optimizer!.v, cb.optimizer!.v)];
  const all = [...params, ...moments];
  const max = (l: TensorDiff[]) => l.reduce((m, d) => Math.max(m, d.maxAbs), 0);
  const optimizerStep: [number, number] = [ca.optimizer!.step, cb.optimizer!.step];
  const momentsExact = moments.every((d) => d.differing === 0) && optimizerStep[0] === optimizerStep[1];
  return {
    exact: momentsExact && params.every((d) => d.differing === 0),
    momentsExact,
    momentsMaxAbs: max(moments),
    paramsMaxAbs: max(params),
    optimizerStep,
    differing: all.filter((d) => d.differing > 0),
    tensors: all.length,
  };
}
