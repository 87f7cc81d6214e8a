// fp16_compress_hook and bf16_compress_hook (PyTorch's default_hooks): the bucket is cast to a
// 16-bit float, all-reduced in 16 bits (every hop widens to float32 and rounds back to nearest
// even, workers/comm/host-memory/dtype.ts) and widened back into the float32 bucket. PyTorch
// divides the bucket by the world size before the cast so the 16-bit sum cannot overflow; here
// the gradients already carry that division (hook.ts), so the hook casts and sums. With an
// emulated shape (HookTensor.wire) the 16-bit payload is the shape's length, zero-padded.
import type { ProcessGroup } from '../comm/index.js';
import { type HalfDType, narrowGradients, widenGradients } from './half-gradients.js';
import { CompressionCounter, type CommHook, type HookBucket, wireNumel } from './hook.js';

export class HalfCompressHook implements CommHook {
  readonly name: string;
  private readonly bits = new Map<number, Uint16Array>();
  private readonly counter = new CompressionCounter();

  constructor(readonly dtype: HalfDType) {
    this.name = dtype === 'float16' ? 'fp16' : 'bf16';
  }

  async run(pg: ProcessGroup, b: HookBucket, data: Float32Array) {
    let bits = this.bits.get(b.index);
    if (!bits) this.bits.set(b.index, (bits = new Uint16Array(Math.max(wireNumel(b), data.length))));
    const mine = bits.subarray(0, data.length);
    narrowGradients(data, this.dtype, mine);
    await pg.allReduce(bits, { op: 'sum', dtype: this.dtype, labels: { ...b.labels, compression: this.name } }).wait();
    widenGradients(mine, this.dtype, data);
    this.counter.add(bits.length, bits.byteLength);
  }

  endStep() {}

  report() {
    return this.counter.report();
  }

  state() {
    return null;
  }
  loadState() {}
}
