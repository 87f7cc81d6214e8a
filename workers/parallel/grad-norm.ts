// The global gradient norm of a model-parallel rank, as Megatron's get_grad_norm forms it: a
// rank sums the squares of the gradients it holds, split into tensor-parallel shards (summed over
// the TP group) and tensors every TP rank holds whole (counted once); then the sum runs over the
// pipeline stages. Under ZeRO-1 a rank holds only its shard of the reduced gradients, so the
// shards' sums are first summed over the data-parallel group. A pipeline's last stage leaves out
// its copy of the tied wte (counted once, on the first stage).
import type { ProcessGroup } from '../comm/index.js';
import { type GpuTensor, viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { sumSquares } from '../kernels/reduce.js';
import { slotElems } from '../../common/padding.js';
import type { ParamStore } from '../model/params.js';
import { shardKind } from '../model/tp-layout.js';

/** Which gradients a rank counts, and which of them are tensor-parallel shards. */
export interface NormParts {
  /** a tensor this rank holds but another rank counts (the last stage's copy of the tied wte) */
  skip?: string;
  /** the tensors are TP shards (3d, tp): sharded and replicated sums apart */
  tensorParallel: boolean;
}

/** Sums of squares [sharded, replicated] of a store's gradients, on the device. */
export class GradSquares {
  private readonly sharded: GpuTensor;
  private readonly replicated: GpuTensor | null = null;
  private readonly kernels: Dispatch[] = [];

  constructor(
    private readonly rt: Runtime,
    params: ParamStore,
    o: NormParts,
  ) {
    this.sharded = rt.allocator.tensor('grad_norm_sq.sharded', 'workspace', [1]);
    if (!o.tensorParallel) {
      // one kernel over the flat layout (a skipped tensor is the first one: wte)
      const skip = o.skip !== undefined ? slotElems(params.get(o.skip).numel, params.precision) : 0;
      if (o.skip !== undefined && params.refs[0]!.name !== o.skip) throw new Error(`GradSquares: ${o.skip} must come first in the layout`);
      this.kernels = sumSquares(rt, {
        out: this.sharded,
        inp: viewOf(params.refs[0]!.grad, 'grads(norm)', skip, params.flatElems - skip),
        n: params.flatElems - skip,
      });
      return;
    }
    this.replicated = rt.allocator.tensor('grad_norm_sq.replicated', 'workspace', [1]);
    const started = new Set<GpuTensor>();
    for (const r of params.refs) {
      if (r.name === o.skip) continue;
      const out = shardKind(r.name) === 'replicated' ? this.replicated : this.sharded;
      this.kernels.push(...sumSquares(rt, { out, inp: r.grad, n: r.numel, accumulate: started.has(out) }));
      started.add(out);
    }
    for (const t of [this.sharded, this.replicated]) if (!started.has(t)) rt.write(t, new Float32Array(1));
  }

  async read(): Promise<[number, number]> {
    this.rt.run(this.kernels);
    const [sharded] = await this.rt.read(this.sharded);
    const replicated = this.replicated ? (await this.rt.read(this.replicated))[0]! : 0;
    return [sharded!, replicated];
  }
}

/** The same sums over a host copy of the reduced gradient shard [a, a + shard.length) of the flat layout (ZeRO-1). */
export function shardSquares(params: ParamStore, shard: Float32Array, a: number, o: NormParts): [number, number] {
  const b = a + shard.length;
  let sharded = 0;
  let replicated = 0;
  for (const r of params.refs) {
    if (r.name === o.skip) continue;
    const lo = Math.max(a, r.offset);
    const hi = Math.min(b, r.offset + r.numel);
    let s = 0;
    for (let i = lo; i < hi; i++) s += shard[i - a]! * shard[i - a]!;
    if (o.tensorParallel && shardKind(r.name) !== 'replicated') sharded += s;
    else replicated += s;
  }
  return [sharded, replicated];
}

/** The groups a rank's sums run over (a missing group: this rank is alone in that dimension). */
export interface NormGroups {
  dp?: ProcessGroup | null;
  tp?: ProcessGroup | null;
  pp?: ProcessGroup | null;
}

/** The squared global norm from this rank's sums of squares. */
export async function reduceNormSq([sharded, replicated]: [number, number], g: NormGroups): Promise<number> {
  const sums = Float32Array.of(sharded, replicated);
  if (g.dp) await g.dp.allReduce(sums, { op: 'sum', labels: { what: 'gradient norm', dp: 1 } }).wait();
  const sq = Float32Array.of(sums[0]!);
  if (g.tp && g.tp.size > 1)
    await g.tp.allReduce(sq, { op: 'sum', labels: { tp: 1, what: 'gradient norm', layer: 'optimizer', op: 'grad-norm' } }).wait();
  sq[0] = Math.fround(sq[0]! + sums[1]!);
  if (g.pp) await g.pp.allReduce(sq, { op: 'sum', labels: { what: 'gradient norm' } }).wait();
  return sq[0]!;
}
