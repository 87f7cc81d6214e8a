// A DDP communication hook (PyTorch's register_comm_hook): what one gradient bucket goes through
// between its readback and its write back to the device. DDP gives the hook this rank's bucket on
// the host and takes back the bucket every rank agrees on. Without a hook that is a plain sum
// all-reduce: the loss is scaled by 1/(tokens of the global batch), so each rank's gradients
// already carry PyTorch's division by the world size and their sum is the averaged gradient.
import type { ProcessGroup } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';

/** One parameter's gradient inside a bucket. */
export interface HookTensor {
  name: string;
  shape: readonly number[];
  /** first element inside the bucket's data */
  start: number;
  numel: number;
  /**
   * Benchmarks with an emulated shape (gpu/emulated-device.ts): this tensor's shape in the
   * emulated model. The hook sends the payload that shape would send (the real one zero-padded:
   * the numbers stay the real ones) and times its math at that shape's FLOPs on the device.
   */
  wire?: readonly number[];
}

export interface HookBucket {
  index: number;
  tensors: readonly HookTensor[];
  /** labels of the bucket's collectives' spans */
  labels: Record<string, string | number>;
}

/** Elements of the bucket in the emulated shape where one is given (HookTensor.wire), else its real elements. */
export function wireNumel(b: HookBucket): number {
  return b.tensors.reduce((a, t) => a + (t.wire ? t.wire.reduce((x, y) => x * y, 1) : t.numel), 0);
}

/**
 * The device a hook's own math is timed on (PyTorch's hooks launch theirs on the GPU stream,
 * between the backward kernels that follow the bucket). An emulated device charges the FLOPs at
 * its rate on its in-order queue; without one the hook's host math takes its real time and the
 * hook gets no HookDevice.
 */
export interface HookDevice {
  /** enqueues `flops` of work behind what the device queue holds now; returns when (epoch ms) it ends */
  enqueueFlops(flops: number): number;
  /** resolves once the device has reached `end` (a result the hook sends next must exist first) */
  reach(end: number): Promise<void>;
}

/** A hook's checkpointed state: named float32 tensors plus the iteration it has reached. */
export interface HookState {
  iter: number;
  tensors: Map<string, Float32Array>;
}

/** What the run summary says about compression, summed over the run. */
export interface HookReport {
  /** float32 bytes the buckets' gradients would have sent, per all-reduce payload */
  uncompressed_bytes: number;
  /** bytes of the payloads the hook all-reduced instead */
  compressed_bytes: number;
  /** L2 norm of this rank's error-feedback memory (PowerSGD) at the end */
  error_feedback_norm?: number;
  /** where the hook's math ran (PowerSGD: on the device, or on the host) */
  math?: 'device' | 'host';
}

export interface CommHook {
  readonly name: string;
  /**
   * Benchmarks with an emulated shape: each parameter's shape in the emulated model, by name
   * (createCommHook sets it); the buckets' tensors carry it as HookTensor.wire.
   */
  wireShapes?: ReadonlyMap<string, readonly number[]>;
  /**
   * The bucket's last gradient has just been recorded, before DDP issues its readback: the device
   * work the hook does before its first collective is enqueued here, where PyTorch's hook launches
   * it (so the readback waits for it, and the backward kernels recorded later queue behind it).
   */
  bucketReady?(bucket: HookBucket): void;
  /**
   * Replaces `data` (this rank's gradients of the bucket, scaled by 1/world) with their sum over
   * the group, or the hook's approximation of it. Buckets are handed over in the same order on
   * every rank; a hook that chains several collectives per bucket must keep that order.
   */
  run(pg: ProcessGroup, bucket: HookBucket, data: Float32Array): Promise<void>;
  /**
   * true: the hook's math runs on the device (PowerSGD made with a runtime): DDP hands it the
   * bucket's gradient view through runOnDevice instead of a host copy through run, and the hook
   * leaves the result there (no readback or write back of the whole bucket).
   */
  readonly onDevice?: boolean;
  runOnDevice?(pg: ProcessGroup, bucket: HookBucket, grads: GpuTensor): Promise<void>;
  /** every bucket of an optimizer step is done */
  endStep(): void;
  /** (a device hook reads its error memory back for it) */
  report(): HookReport | Promise<HookReport>;
  /** the state a resumed run needs to continue exactly (null: stateless) */
  state(): HookState | null | Promise<HookState | null>;
  loadState(s: HookState): void;
}

/** the run summary's compression figures (workers/protocol/train.ts, the done message) */
export interface GradCompressionReport extends HookReport {
  hook: string;
  compression_ratio: number;
}

/** The summary's figures of the compression named `hook` from what it reports. */
export const compressionReport = (hook: string, r: HookReport): GradCompressionReport => ({
  hook,
  compression_ratio: r.uncompressed_bytes / Math.max(1, r.compressed_bytes),
  ...r,
});

/** Counts payload bytes: what the bucket would have sent in float32, and what the hook sent. */
export class CompressionCounter {
  uncompressed = 0;
  compressed = 0;
  add(float32Elems: number, sentBytes: number) {
    this.uncompressed += float32Elems * 4;
    this.compressed += sentBytes;
  }
  report(): HookReport {
    return { uncompressed_bytes: this.uncompressed, compressed_bytes: this.compressed };
  }
}
