// A DDP communication hook (PyTorch's register_comm_hook): what one gradient bucket goes through
// between its readback and its write back to the device. DDP gives the hook this rank's bucket on
// the host and takes back the bucket every rank agrees on. Without a hook that is a plain sum
// all-reduce: the loss is scaled by 1/(tokens of the global batch), so each rank's gradients
// already carry PyTorch's division by the world size and their sum is the averaged gradient.
import type { ProcessGroup } from '../comm/index.js';

/** One parameter's gradient inside a bucket. */
export interface HookTensor {
  name: string;
  shape: readonly number[];
  /** first element inside the bucket's data */
  start: number;
  numel: number;
}

export interface HookBucket {
  index: number;
  tensors: readonly HookTensor[];
  /** labels of the bucket's collectives' spans */
  labels: Record<string, string | number>;
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
}

export interface CommHook {
  readonly name: string;
  /**
   * Replaces `data` (this rank's gradients of the bucket, scaled by 1/world) with their sum over
   * the group, or the hook's approximation of it. Buckets are handed over in the same order on
   * every rank; a hook that chains several collectives per bucket must keep that order.
   */
  run(pg: ProcessGroup, bucket: HookBucket, data: Float32Array): Promise<void>;
  /** every bucket of an optimizer step is done */
  endStep(): void;
  report(): HookReport;
  /** the state a resumed run needs to continue exactly (null: stateless) */
  state(): HookState | null;
  loadState(s: HookState): void;
}

/** Counts payload bytes: what the bucket would have sent in float32, and what the hook sent. */
export class CompressionCounter {
  uncompressed = 0;
  compressed = 0;
  add(float32Elems: number, sentBytes: number) {
    this.uncompressed += float32Elems * 4;
    this.compressed += sentBytes;
  }
}
