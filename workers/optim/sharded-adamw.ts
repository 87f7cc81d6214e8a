// AdamW over one contiguous shard [start, end) of the flat parameter layout (ZeRO's
// partitioned optimizer states): the moments exist for the shard only, 8 bytes per element.
// The update runs over each run of same-decay parameters that falls inside the shard; the
// clipping norm is the global one, which the strategy writes into gradSumSq.
// Mixed precision (a bf16 or fp16 store): the shard also keeps its fp32 master weights (with m
// and v, 12 bytes per element of the shard: K = 12 over N ranks). The update reads the 16-bit
// gradient shard, divides out the loss scale and updates the master; one cast then re-derives
// the shard of the 16-bit weights, which the strategy all-gathers. fp16 skips the update on an
// inf/NaN global norm (the strategy's all-reduced sum: every rank sees the same verdict).
import type { GpuTensor } from '../gpu/allocator.js';
import { viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { adamw } from '../kernels/adamw.js';
import { cast } from '../kernels/cast.js';
import { sumSquares } from '../kernels/reduce.js';
import { slotElems } from '../../common/padding.js';
import type { ParamStore } from '../model/params.js';
import { type AdamwConfig, type AdamwRun, recordAdamwRuns } from './adamw.js';

export class ShardedAdamW {
  readonly m: GpuTensor | null;
  readonly v: GpuTensor | null;
  /** squared gradient norm: this shard's after recordLocalSumSq, the global one once the strategy wrote it */
  readonly gradSumSq: GpuTensor;
  /** mixed precision: the shard's fp32 master weights (element 0 = flat element `start`); null at fp32 */
  readonly master: GpuTensor | null;
  /** fp16: an inf/NaN global norm skips the update */
  readonly skipsOverflow: boolean;
  step = 0;
  private readonly runs: AdamwRun[] = [];
  private readonly localNorm: Dispatch[];
  /** mixed precision: the shard's 16-bit weights from its master, after every update */
  private readonly castKernel: Dispatch[] = [];

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
    const p = store.precision;
    this.skipsOverflow = p === 'fp16';
    this.m = n > 0 ? rt.allocator.tensor('exp_avg[shard]', 'optimizer', [n]) : null;
    this.v = n > 0 ? rt.allocator.tensor('exp_avg_sq[shard]', 'optimizer', [n]) : null;
    this.master = p !== 'fp32' && n > 0 ? rt.allocator.tensor('master[shard]', 'optimizer', [n]) : null;
    this.gradSumSq = rt.allocator.tensor('grad_norm_sq', 'workspace', [1]);
    // gradient element i of the flat layout: grads[i - gradBase]
    const grads = gradShard ?? store.refs[0]!.grad;
    const gradBase = gradShard ? start : 0;
    const params = this.master ?? paramShard ?? store.refs[0]!.param;
    const paramBase = this.master || paramShard ? start : 0;
    this.localNorm = n > 0 ? sumSquares(rt, { out: this.gradSumSq, inp: viewOf(grads, 'grads[shard]', start - gradBase, n), n }) : [];
    if (n === 0) return;
    // runs of same-decay parameters, clipped to the shard
    const refs = store.refs;
    let i = 0;
    while (i < refs.length) {
      let j = i;
      while (j < refs.length && refs[j]!.spec.decay === refs[i]!.spec.decay) j++;
      const a = Math.max(start, refs[i]!.offset);
      // 16-bit: to the end of the last slot (whole 4-element vectors; the padding's gradients are 0)
      const last = refs[j - 1]!;
      const b = Math.min(end, last.offset + (this.master ? slotElems(last.numel, p) : last.numel));
      if (b > a) {
        const kernel = adamw(rt, {
          params: viewOf(params, `p[${a},${b})`, a - paramBase, b - a),
          grads: viewOf(grads, `g[${a},${b})`, a - gradBase, b - a),
          m: viewOf(this.m!, `m[${a},${b})`, a - start, b - a),
          v: viewOf(this.v!, `v[${a},${b})`, a - start, b - a),
          n: b - a,
          gradSumSq: this.gradSumSq,
          skipNonFinite: this.skipsOverflow,
        });
        this.runs.push({ decay: refs[i]!.spec.decay, kernel });
      }
      i = j;
    }
    if (this.master) {
      const weights = paramShard ? viewOf(paramShard, 'params[shard]', 0, n) : viewOf(store.refs[0]!.param, 'params[shard]', start, n);
      this.castKernel = cast(rt, { out: weights, inp: this.master, n });
    }
  }

  /** Record this shard's sum of squared gradients into gradSumSq. */
  recordLocalSumSq() {
    if (this.localNorm.length) this.rt.run(this.localNorm);
    else this.rt.clear(this.gradSumSq);
  }

  /** Record the update of gradients that carry the loss scale `gradScale`; mixed precision then casts the shard's 16-bit weights. */
  recordStep(lr: number, gradScale = 1) {
    this.step += 1;
    recordAdamwRuns(this.rt, this.runs, this.config, this.step, lr, gradScale);
    this.rt.run(this.castKernel);
  }

  /** After recordStep with the global squared norm `sumSq`: an fp16 overflow wrote nothing, and the step is taken back from t. */
  settle(sumSq: number) {
    if (this.skipsOverflow && !Number.isFinite(sumSq)) this.step -= 1;
  }

  /** Mixed precision: the shard's master weights. */
  async readMaster(): Promise<Float32Array> {
    if (!this.master) return new Float32Array(0);
    return this.rt.read(this.master);
  }

  /** Mixed precision: take the shard's master weights and record the cast of its 16-bit weights. */
  writeMaster(values: Float32Array) {
    if (!this.master) return;
    this.rt.write(this.master, values);
    this.rt.run(this.castKernel);
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
