// AdamW over one contiguous shard [start, end) of the flat parameter layout (ZeRO's
// partitioned optimizer states): the moments exist for the shard only, 8 bytes per element.
// The update runs over each run of same-decay parameters that falls inside the shard; the
// clipping norm is the global one, which the strategy writes into gradSumSq.
import type { GpuTensor } from '../gpu/allocator.js';
import { viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { adamw } from '../kernels/adamw.js';
import { sumSquares } from '../kernels/reduce.js';
import type { ParamStore } from '../model/params.js';
import { type AdamwConfig, type AdamwRun, recordAdamwRuns } from './adamw.js';

export class ShardedAdamW {
  readonly m: GpuTensor | null;
  readonly v: GpuTensor | null;
  /** squared gradient norm: this shard's after recordLocalSumSq, the global one once the strategy wrote it */
  readonly gradSumSq: GpuTensor;
  step = 0;
  private readonly runs: AdamwRun[] = [];
  private readonly localNorm: Dispatch[];

  constructor(
    private readonly rt: Runtime,
    store: ParamStore,
    readonly config: AdamwConfig,
    readonly start: number,
    readonly end: number,
    /** ZeRO-2: the shard's gradients in their own buffer (element 0 = flat element `start`) */
    gradShard?: GpuTensor,
    /** ZeRO-3: the shard's parameters in their own buffer (element 0 = flat element `start`) */
    paramShard?: GpuTensor,
  ) {
    const n = end - start;
    this.m = n > 0 ? rt.allocator.tensor('exp_avg[shard]', 'optimizer', [n]) : null;
    this.v = n > 0 ? rt.allocator.tensor('exp_avg_sq[shard]', 'optimizer', [n]) : null;
    this.gradSumSq = rt.allocator.tensor('grad_norm_sq', 'workspace', [1]);
    // gradient element i of the flat layout: grads[i - gradBase]
    const grads = gradShard ?? store.refs[0]!.grad;
    const gradBase = gradShard ? start : 0;
    const params = paramShard ?? store.refs[0]!.param;
    const paramBase = paramShard ? start : 0;
    this.localNorm = n > 0 ? sumSquares(rt, { out: this.gradSumSq, inp: viewOf(grads, 'grads[shard]', start - gradBase, n), n }) : [];
    if (n === 0) return;
    // runs of same-decay parameters, clipped to the shard
    const refs = store.refs;
    let i = 0;
    while (i < refs.length) {
      let j = i;
      while (j < refs.length && refs[j]!.spec.decay === refs[i]!.spec.decay) j++;
      const a = Math.max(start, refs[i]!.offset);
      const b = Math.min(end, refs[j - 1]!.offset + refs[j - 1]!.numel);
      if (b > a) {
        const kernel = adamw(rt, {
          params: viewOf(params, `p[${a},${b})`, a - paramBase, b - a),
          grads: viewOf(grads, `g[${a},${b})`, a - gradBase, b - a),
          m: viewOf(this.m!, `m[${a},${b})`, a - start, b - a),
          v: viewOf(this.v!, `v[${a},${b})`, a - start, b - a),
          n: b - a,
          gradSumSq: this.gradSumSq,
        });
        this.runs.push({ decay: refs[i]!.spec.decay, kernel });
      }
      i = j;
    }
  }

  /** Record this shard's sum of squared gradients into gradSumSq. */
  recordLocalSumSq() {
    if (this.localNorm.length) this.rt.run(this.localNorm);
    else this.rt.clear(this.gradSumSq);
  }

  recordStep(lr: number) {
    this.step += 1;
    recordAdamwRuns(this.rt, this.runs, this.config, this.step, lr);
  }

  async readShard(): Promise<{ m: Float32Array; v: Float32Array }> {
    if (!this.m || !this.v) return { m: new Float32Array(0), v: new Float32Array(0) };
    return { m: await this.rt.read(this.m), v: await this.rt.read(this.v) };
  }

  writeShard(m: Float32Array, v: Float32Array, step: number) {
    if (this.m && this.v) {
      this.rt.write(this.m, m);
      this.rt.write(this.v, v);
    }
    this.step = step;
  }
}
