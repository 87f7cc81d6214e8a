// fp16_compress_hook and bf16_compress_hook (PyTorch's default_hooks): the bucket is cast to a
// 16-bit float, all-reduced in 16 bits (every hop widens to float32 and rounds back to nearest
// even, workers/comm/host-memory/dtype.ts) and widened back into the float32 bucket. PyTorch
// divides the bucket by the world size before the cast so the 16-bit sum cannot overflow; here
// the gradients already carry that division (hook.ts), so the hook casts and sums.
import { floatToBfloat16, floatToHalf, halfToFloat, bfloat16ToFloat, type ProcessGroup } from '../../comm/index.js';
import { CompressionCounter, type CommHook, type HookBucket } from './hook.js';

export type HalfDType = 'float16' | 'bfloat16';

const NARROW: Record<HalfDType, (x: number) => number> = { float16: floatToHalf, bfloat16: floatToBfloat16 };
const WIDEN: Record<HalfDType, (h: number) => number> = { float16: halfToFloat, bfloat16: bfloat16ToFloat };

export class HalfCompressHook implements CommHook {
  readonly name: string;
  private readonly bits = new Map<number, Uint16Array>();
  private readonly counter = new CompressionCounter();

  constructor(readonly dtype: HalfDType) {
    this.name = dtype === 'float16' ? 'fp16' : 'bf16';
  }

  async run(pg: ProcessGroup, b: HookBucket, data: Float32Array) {
    let bits = this.bits.get(b.index);
    if (!bits || bits.length !== data.length) this.bits.set(b.index, (bits = new Uint16Array(data.length)));
    const narrow = NARROW[this.dtype];
    for (let i = 0; i < data.length; i++) bits[i] = narrow(data[i]);
    await pg.allReduce(bits, { op: 'sum', dtype: this.dtype, labels: { ...b.labels, compression: this.name } }).wait();
    const widen = WIDEN[this.dtype];
    for (let i = 0; i < data.length; i++) data[i] = widen(bits[i]);
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
