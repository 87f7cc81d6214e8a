// Gradient compression, apart from the strategies that use it (PyTorch keeps ddp_comm_hooks
// apart from DDP): DDP communication hooks (fp16 and bf16 compression, PowerSGD) and the 16-bit
// cast of ZeRO's gradient reduce-scatter (half-gradients.ts). A job names one in
// parallel.grad_compression (workers/protocol/train.ts); DDP runs every gradient bucket through
// its hook (workers/parallel/ddp.ts), ZeRO-1/2 reduce-scatter in 16 bits (workers/parallel/zero1.ts).
import type { GradCompression } from '../protocol/train.js';
import { HalfCompressHook } from './half-compress.js';
import type { Runtime } from '../gpu/runtime.js';
import type { CommHook, HookDevice } from './hook.js';
import { POWERSGD_DEFAULTS, PowerSgdHook } from './powersgd.js';

export {
  compressionReport,
  CompressionCounter,
  wireNumel,
  type CommHook,
  type GradCompressionReport,
  type HookBucket,
  type HookDevice,
  type HookReport,
  type HookState,
  type HookTensor,
} from './hook.js';
export { type HalfDType, HalfReduceScatter, narrowGradients, reduceScatterHalf, widenGradients } from './half-gradients.js';
export { BucketHooks, type BucketPlace } from './bucket-hooks.js';
export { HalfCompressHook } from './half-compress.js';
export { gatherHookStates, hookRecord, resumedHookStates } from './hook-state.js';
export { PowerSgdHook, POWERSGD_DEFAULTS, orthogonalize, type PowerSgdOptions } from './powersgd.js';
export { planBucket } from './powersgd-math.js';

/** ZeRO-1/2's 16-bit gradient reduce-scatter under fp16/bf16 compression (the strategy table refuses PowerSGD there). */
export function halfGradientsOf(g: GradCompression | undefined): 'fp16' | 'bf16' | undefined {
  const hook = g?.hook;
  return hook === 'fp16' || hook === 'bf16' ? hook : undefined;
}

/** Where a hook runs: the rank's runtime and world size, and what an emulated device (benchmarks) adds. */
export interface HookPlace {
  rt: Runtime;
  world: number;
  /** an emulated device that times the hook's math, else null (its real time) */
  device?: HookDevice | null;
  /** an emulated shape's parameter shapes, by name: the hook sends that shape's payloads */
  wireShapes?: ReadonlyMap<string, readonly number[]>;
}

/**
 * The hook a job asks for, or null (plain all-reduce). `seed`: the run's seed (PowerSGD's random
 * starts). PowerSGD's math runs on the rank's device unless the setting's `math` says 'host' or,
 * without it, the adapter is a software one (its device is the CPU).
 */
export function createCommHook(g: GradCompression | undefined, seed: number, at: HookPlace): CommHook | null {
  const hook = hookOf(g, seed, at);
  if (hook && at.wireShapes) hook.wireShapes = at.wireShapes;
  return hook;
}

function hookOf(g: GradCompression | undefined, seed: number, at: HookPlace): CommHook | null {
  if (!g || g.hook === 'none') return null;
  if (g.hook === 'fp16') return new HalfCompressHook('float16');
  if (g.hook === 'bf16') return new HalfCompressHook('bfloat16');
  return new PowerSgdHook(
    {
      rank: g.matrix_approximation_rank ?? 1,
      startIter: g.start_powerSGD_iter ?? POWERSGD_DEFAULTS.startIter,
      minCompressionRate: g.min_compression_rate ?? POWERSGD_DEFAULTS.minCompressionRate,
      errorFeedback: g.use_error_feedback ?? POWERSGD_DEFAULTS.errorFeedback,
      warmStart: g.warm_start ?? POWERSGD_DEFAULTS.warmStart,
      seed,
      epsilon: POWERSGD_DEFAULTS.epsilon,
    },
    at.device ?? null,
    (g.math ?? (at.rt.opened.report.isSoftware ? 'host' : 'device')) === 'device' ? { rt: at.rt, world: at.world } : null,
  );
}
