// DDP's side of its communication hook: the buckets as the hook sees them (each parameter's name,
// shape and place inside the bucket, forward order as PyTorch's per-parameter tensors of a bucket;
// an emulated shape's wire shapes) and the calls DDP makes, by bucket index. DDP hands over its
// buckets' places in the flat layout; this file keeps the hook's vocabulary out of the strategy.
import type { ProcessGroup } from '../comm/index.js';
import type { GpuTensor } from '../gpu/allocator.js';
import { type CommHook, compressionReport, type HookBucket, type HookState } from './hook.js';

/** A DDP bucket: its index, its first element in the flat layout, its parameters' places there. */
export interface BucketPlace {
  index: number;
  start: number;
  params: readonly { name: string; shape: readonly number[]; offset: number; numel: number }[];
}

export class BucketHooks {
  private readonly buckets = new Map<number, HookBucket>();

  constructor(
    private readonly hook: CommHook,
    places: readonly BucketPlace[],
  ) {
    const wireShapes = hook.wireShapes;
    for (const b of places) {
      const tensors = [...b.params]
        .sort((x, y) => x.offset - y.offset)
        .map((p) => {
          const wire = wireShapes?.get(p.name);
          return { name: p.name, shape: p.shape, start: p.offset - b.start, numel: p.numel, ...(wire ? { wire } : {}) };
        });
      this.buckets.set(b.index, { index: b.index, tensors, labels: { bucket: b.index, params: b.params.length } });
    }
  }

  /** the bucket's last gradient is recorded, before its readback (the readback waits for the hook's device work) */
  ready(index: number) {
    this.hook.bucketReady?.(this.buckets.get(index)!);
  }

  /** the hook's reduction of the bucket's host copy `data`, in place; it posts (or queues) its first collective at once */
  run(pg: ProcessGroup, index: number, data: Float32Array): Promise<void> {
    return this.hook.run(pg, this.buckets.get(index)!, data);
  }

  /** the hook's math runs on the device: DDP hands it gradient views (runOnDevice), not host copies */
  get onDevice(): boolean {
    return this.hook.onDevice === true;
  }

  /** the hook's reduction of the bucket's gradients where they are, on the device; it posts (or queues) its first collective once its first readback is back */
  runOnDevice(pg: ProcessGroup, index: number, grads: GpuTensor): Promise<void> {
    return this.hook.runOnDevice!(pg, this.buckets.get(index)!, grads);
  }

  endStep() {
    this.hook.endStep();
  }

  async summary() {
    return { grad_compression: compressionReport(this.hook.name, await this.hook.report()) };
  }

  state(): Promise<HookState | null> {
    return Promise.resolve(this.hook.state());
  }

  loadState(s: HookState) {
    this.hook.loadState(s);
  }
}
