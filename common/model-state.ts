// The ZeRO paper's formula for one rank's model states, in this engine's precision (fp32
// weights and gradients, AdamW's two fp32 moments: 4 + 4 + 8 bytes per parameter), for Ψ
// parameters over N data-parallel ranks. The dashboard draws it as the reference line of each
// memory chart and the launch view compares it with each device's limit. Padding of shards to
// whole slots and bucket buffers make the measured bytes a little larger.
import type { ModelStateBytes } from './charts/types.js';

export interface ModelStateQuery {
  strategy: string;
  world: number;
  /** Ψ: the model's parameter count */
  params: number;
  rank: number;
  /** ZeRO-Offload: master weights, moments and update on the host */
  offloadOptimizer?: boolean;
}

/** Predicted device bytes of the rank's weights, gradients and optimizer state; null where no formula applies here (tp, pp, 3d). */
export function predictModelStateBytes(q: ModelStateQuery): ModelStateBytes | null {
  const P = 4 * q.params;
  const N = Math.max(1, q.world);
  const offload = q.offloadOptimizer === true;
  switch (q.strategy) {
    case 'single':
    case 'ddp':
      return { params: P, grads: P, optimizer: 2 * P };
    case 'dp':
      // parameter server: the optimizer lives on rank 0 only
      return { params: P, grads: P, optimizer: q.rank === 0 ? 2 * P : 0 };
    case 'zero1':
      return { params: P, grads: P, optimizer: offload ? 0 : (2 * P) / N };
    case 'zero2':
      return { params: P, grads: P / N, optimizer: offload ? 0 : (2 * P) / N };
    case 'zero3':
      return { params: P / N, grads: P / N, optimizer: offload ? 0 : (2 * P) / N };
    default:
      return null;
  }
}

export const modelStateTotal = (b: ModelStateBytes): number => b.params + b.grads + b.optimizer;
