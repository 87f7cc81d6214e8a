// A Shardwise layout in PyTorch's own terms: which wrapper (DistributedDataParallel, FSDP or
// none), which optimizer (AdamW, or ZeroRedundancyOptimizer around it), which DDP
// communication hook, autocast and GradScaler settings. The generated train.py reads this plan
// from job.json and does exactly what it says; what has no PyTorch counterpart is listed in
// `unmapped` (with why), which the exported README prints.
import { TABLE } from '../../../common/strategies.js';
import type { LossScalerState } from '../../precision/loss-scaler.js';
import { lossScaleOf, precisionOf, type ParallelSpec, type TrainJob } from '../../protocol/train.js';
import { POWERSGD_DEFAULTS } from '../../comm-hooks/powersgd.js';
import { splitOf } from './cluster-configs.js';

export interface PowerSgdHookPlan {
  name: 'powerSGD';
  matrix_approximation_rank: number;
  start_powerSGD_iter: number;
  min_compression_rate: number;
  use_error_feedback: boolean;
  warm_start: boolean;
  /** the hook's iteration at the start (a resumed hook is already past its uncompressed steps) */
  iter: number;
}

export interface TorchPlan {
  /** ranks of the PyTorch job */
  world: number;
  wrapper: 'none' | 'ddp' | 'fsdp';
  /** DDP's bucket_cap_mb */
  bucket_cap_mb?: number;
  /** FSDP's ShardingStrategy member */
  sharding_strategy?: 'SHARD_GRAD_OP' | 'FULL_SHARD';
  /** FSDP's CPUOffload(offload_params=...) */
  cpu_offload?: boolean;
  optimizer: 'adamw' | 'zero';
  comm_hook: PowerSgdHookPlan | { name: 'fp16_compress' | 'bf16_compress' } | null;
  /** torch.autocast dtype (a torch attribute name), null for fp32 */
  autocast: 'bfloat16' | 'float16' | null;
  /** fp16: torch.cuda.amp.GradScaler's settings (init_scale from the checkpoint's scale where it has one) */
  grad_scaler: { init_scale: number; growth_interval: number } | null;
  micro_batches: number;
  activation_checkpointing: boolean;
  /** PyTorch's term for each part of the layout, for the README's table */
  mapping: [string, string][];
  /** what the PyTorch job does not do as Shardwise did, and why */
  unmapped: string[];
}

export class PlanError extends Error {
  override name = 'PlanError';
}

/** The PyTorch plan of a job's layout; `hookIter` and `scaler` are the checkpoint's where it has them. */
export function torchPlan(job: TrainJob, par: ParallelSpec, opts: { hookIter?: number; scaler?: LossScalerState } = {}): TorchPlan {
  const precision = precisionOf(job);
  const mapping: [string, string][] = [];
  const unmapped: string[] = [];
  let world = par.world;
  let wrapper = 'none' as TorchPlan['wrapper']; // (set inside ddp() too)
  let optimizer: TorchPlan['optimizer'] = 'adamw';
  let sharding: TorchPlan['sharding_strategy'];
  const offload = par.offload_optimizer === 'cpu';
  const ddp = () => {
    wrapper = 'ddp';
    mapping.push([`${par.strategy} over ${world} ranks`, `DistributedDataParallel(bucket_cap_mb=${par.bucket_cap_mb})`]);
    unmapped.push(
      `first_bucket_mb ${par.first_bucket_mb}: DistributedDataParallel sizes its first bucket itself (1 MiB) and takes no argument for it`,
    );
  };
  // PyTorch's counterpart of what the table says the strategy does
  const s = TABLE[par.strategy];
  if (s.oneRank) mapping.push([par.strategy, 'one process, no wrapper']);
  else if (s.splitsModel) {
    // core PyTorch has no tensor- or pipeline-parallel trainer for this model: train.py keeps the
    // math (data parallel over the replicas) and ds_config.json / megatron_args.txt carry the layout
    const { dp, tp, pp } = splitOf(par);
    world = dp;
    if (dp > 1) ddp();
    mapping.push([
      `${par.strategy} (tp ${tp}, pp ${pp})`,
      `train.py: ${dp > 1 ? `DistributedDataParallel over the ${dp} data-parallel replicas` : 'one process'}; the model split: ds_config.json (DeepSpeed) and megatron_args.txt (Megatron-LM)`,
    ]);
    unmapped.push(
      `tensor and pipeline parallelism: core PyTorch has no tensor- or pipeline-parallel trainer for a GPT, so train.py runs the same math over ${world} rank(s); run the split itself with DeepSpeed or Megatron-LM from the files beside it`,
    );
  } else if (s.zeroStage >= 2) {
    wrapper = 'fsdp';
    sharding = s.zeroStage === 2 ? 'SHARD_GRAD_OP' : 'FULL_SHARD';
    mapping.push([
      `${par.strategy}${offload ? ' + offload' : ''}`,
      `FullyShardedDataParallel(sharding_strategy=ShardingStrategy.${sharding}${offload ? ', cpu_offload=CPUOffload(offload_params=True)' : ''})`,
    ]);
    unmapped.push(
      'FSDP needs PyTorch >= 2.0 (1.13 cannot import torch.distributed.fsdp on Python 3.11); the exported FSDP path is checked only as far as such a PyTorch allows',
    );
    if (offload)
      unmapped.push(
        "FSDP's CPUOffload keeps parameters and gradients on the host too, where Shardwise's offload (DeepSpeed's offload_optimizer) moves only the optimizer state and its update",
      );
    if (par.prefetch) mapping.push(['prefetch', 'FSDP forward_prefetch / backward_prefetch (its defaults prefetch backward)']);
  } else {
    ddp();
    if (s.optimizerRanks === 'rank0')
      unmapped.push(
        `${par.strategy} all-reduces after the whole backward; DistributedDataParallel overlaps it with backward (same gradients, earlier)`,
      );
    if (s.zeroStage === 1) {
      optimizer = 'zero';
      mapping.push([`${par.strategy} (optimizer state sharded)`, 'ZeroRedundancyOptimizer(optimizer_class=torch.optim.AdamW)']);
    }
  }
  let comm_hook: TorchPlan['comm_hook'] = null;
  const g = par.grad_compression;
  if (g && g.hook !== 'none') {
    if (wrapper === 'ddp' && optimizer !== 'zero') {
      if (g.hook === 'powersgd') {
        const start = g.start_powerSGD_iter ?? POWERSGD_DEFAULTS.startIter;
        const errorFeedback = g.use_error_feedback ?? POWERSGD_DEFAULTS.errorFeedback;
        const warmStart = g.warm_start ?? POWERSGD_DEFAULTS.warmStart;
        // PyTorch refuses start_powerSGD_iter < 2 with error feedback or warm start
        const torchStart = errorFeedback || warmStart ? Math.max(2, start) : start;
        if (torchStart !== start)
          unmapped.push(`start_powerSGD_iter ${start}: PyTorch requires at least 2 with error feedback or warm start, so it is 2`);
        comm_hook = {
          name: 'powerSGD',
          matrix_approximation_rank: g.matrix_approximation_rank ?? 1,
          start_powerSGD_iter: torchStart,
          min_compression_rate: g.min_compression_rate ?? POWERSGD_DEFAULTS.minCompressionRate,
          use_error_feedback: errorFeedback,
          warm_start: warmStart,
          iter: opts.hookIter ?? 0,
        };
        mapping.push([
          `powersgd:${comm_hook.matrix_approximation_rank}`,
          `register_comm_hook(PowerSGDState(matrix_approximation_rank=${comm_hook.matrix_approximation_rank}, start_powerSGD_iter=${torchStart}), powerSGD_hook)`,
        ]);
        unmapped.push(
          "PowerSGD's error feedback and warm-start Q: they start at zero and from PyTorch's own random Q (Shardwise's are per bucket of its own bucketing, which DistributedDataParallel's differs from), so losses stay close but not equal",
        );
      } else {
        comm_hook = { name: `${g.hook}_compress` };
        mapping.push([`grad compression ${g.hook}`, `register_comm_hook(None, default_hooks.${g.hook}_compress_hook)`]);
      }
    } else {
      unmapped.push(
        `grad compression ${g.hook} under ${par.strategy}: PyTorch's communication hooks run inside DistributedDataParallel only; the job reduces gradients in fp32`,
      );
    }
  }
  let autocast: TorchPlan['autocast'] = null;
  let grad_scaler: TorchPlan['grad_scaler'] = null;
  if (precision === 'bf16') {
    autocast = 'bfloat16';
    mapping.push(['bf16', 'torch.autocast(dtype=torch.bfloat16); weights and AdamW state stay fp32']);
    unmapped.push(
      'bf16: Shardwise keeps the weights, gradients and activations in bf16 with an fp32 master; autocast keeps fp32 weights and gradients and runs matrix products in bf16, so losses agree within mixed precision, not bit for bit',
    );
  } else if (precision === 'fp16') {
    const ls = lossScaleOf(job)!;
    autocast = 'float16';
    const init = opts.scaler?.scale ?? ls.static_scale ?? 2 ** ls.initial_scale_power;
    grad_scaler = { init_scale: init, growth_interval: ls.loss_scale_window };
    mapping.push([
      'fp16',
      `torch.autocast(dtype=torch.float16) + GradScaler(init_scale=${init}, growth_interval=${ls.loss_scale_window}, growth_factor=2, backoff_factor=0.5)`,
    ]);
    unmapped.push(
      `fp16 loss scaling: GradScaler halves on every overflow (DeepSpeed's hysteresis ${ls.hysteresis} and min_loss_scale ${ls.min_loss_scale} have no GradScaler setting); PyTorch's GradScaler and fp16 autocast run on CUDA only, so on a CPU the job trains fp32`,
    );
  }
  if (par.micro_batches > 1)
    mapping.push([`micro_batches ${par.micro_batches}`, 'gradient accumulation, DistributedDataParallel.no_sync() until the last']);
  if (job.train.activation_checkpointing) mapping.push(['activation checkpointing', 'torch.utils.checkpoint.checkpoint per block']);
  return {
    world,
    wrapper,
    ...(wrapper === 'ddp' ? { bucket_cap_mb: par.bucket_cap_mb } : {}),
    ...(wrapper === 'fsdp' ? { sharding_strategy: sharding, cpu_offload: offload } : {}),
    optimizer,
    comm_hook,
    autocast,
    grad_scaler,
    micro_batches: par.micro_batches,
    activation_checkpointing: job.train.activation_checkpointing,
    mapping,
    unmapped,
  };
}
