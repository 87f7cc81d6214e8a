// fp16_compress_hook and bf16_compress_hook (PyTorch's default_hooks): the bucket is cast to a
// 16-bit float, all-reduced in 16 bits (every hop widens to float32 and rounds back to nearest
// even, workers/comm/host-memory/dtype.ts) and widened back into the float32 bucket. PyTorch
// divides the bucket by the world size before the cast so the 16-bit sum cannot overflow; here
// the gradients already carry that division (hook.ts), so the hook casts and sums.
import type { ProcessGroup } from '../comm/index.js';
import { type HalfDType, narrowGradients, widenGradients } from './half-gradients.js';
import { CompressionCounter, type CommHook, type HookBucket } from './hook.js';

export class HalfCompressHook implements CommHook {
  readonly name: string;
  private readonly bits = new Map<number, Uint16Array>();
  private readonly counter = new CompressionCounter();

  constructor(readonly dtype: HalfDType) {
    this.name = dtype === 'float16' ? 'fp16' : 'bf16';
  }

  async run(pg: ProcessGroup, b: HookBucket, data: Float32Array) {
    const bits = narrowGradients(data, this.dtype, this.bits.get(b.index));
    this.bits.set(b.index, bits);
    await pg.allReduce(bits, { op: 'sum', dtype: this.dtype, labels: { ...b.labels, compression: this.name } }).wait();
    widenGradients(bits, this.dtype, data);
    this.counter.add(data.length, bits.byteLength);
  }

  endStep() {}

  report() {
    return { uncompressed_bytes: this.counter.uncompressed, compressed_bytes: this.counter.compressed };
  }

  state() {
    return null;
  }
  loadState() {}
}
