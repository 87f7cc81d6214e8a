// The layout for the engines clusters run tensor and pipeline parallelism with: DeepSpeed's
// ds_config.json (its documented keys: batch sizes, clipping, ZeRO stage, precision with the
// run's loss scaler, AdamW and the warm-up + cosine schedule) and Megatron-LM's command-line
// arguments (megatron_args.txt: model shape, the split, micro-batches, schedule, precision).
import { TABLE } from '../../../common/strategies.js';
import { lossScaleOf, precisionOf, type ParallelSpec, type TrainJob } from '../../protocol/train.js';

export interface ClusterConfigs {
  deepspeed: Record<string, unknown>;
  megatron: string;
}

/** tp, pp and dp sizes of a layout (a strategy that names one of them only has the others at 1). */
export function splitOf(par: ParallelSpec): { tp: number; pp: number; dp: number } {
  return TABLE[par.strategy].grid(par); // the strategy table's grid: the one rule for every strategy
}

export function clusterConfigs(job: TrainJob, par: ParallelSpec): ClusterConfigs {
  const t = job.train;
  const { tp, pp, dp } = splitOf(par);
  const m = par.micro_batches;
  const micro = t.batch_size / dp / m;
  const precision = precisionOf(job);
  const ls = lossScaleOf(job);
  const T = t.seq_len ?? job.model.block_size;
  const deepspeed: Record<string, unknown> = {
    train_batch_size: t.batch_size,
    train_micro_batch_size_per_gpu: micro,
    gradient_accumulation_steps: m,
    gradient_clipping: t.grad_clip,
    steps_per_print: 1,
    optimizer: { type: 'AdamW', params: { lr: t.lr, betas: [t.beta1, t.beta2], eps: t.eps, weight_decay: t.weight_decay } },
    scheduler: {
      type: 'WarmupCosineLR',
      params: {
        total_num_steps: t.steps,
        warmup_num_steps: t.warmup_steps,
        warmup_type: 'linear',
        cos_min_ratio: t.lr > 0 ? t.min_lr / t.lr : 0,
      },
    },
    zero_optimization: {
      stage: TABLE[par.strategy].zeroStage,
      reduce_bucket_size: Math.round((par.bucket_cap_mb * 1024 * 1024) / 4),
      ...(par.offload_optimizer === 'cpu' ? { offload_optimizer: { device: 'cpu' } } : {}),
    },
    bf16: { enabled: precision === 'bf16' },
    fp16: ls
      ? {
          enabled: true,
          loss_scale: ls.static_scale ?? 0,
          initial_scale_power: ls.initial_scale_power,
          loss_scale_window: ls.loss_scale_window,
          hysteresis: ls.hysteresis,
          min_loss_scale: ls.min_loss_scale,
        }
      : { enabled: false },
    ...(t.activation_checkpointing
      ? { activation_checkpointing: { partition_activations: par.partition_activations ?? true, contiguous_memory_optimization: false } }
      : {}),
  };
  const args: [string, string | number | null][] = [
    ['--tensor-model-parallel-size', tp],
    ['--pipeline-model-parallel-size', pp],
    ['--num-layers', job.model.n_layer],
    ['--hidden-size', job.model.d_model],
    ['--ffn-hidden-size', 4 * job.model.d_model],
    ['--num-attention-heads', job.model.n_head],
    ['--seq-length', T],
    ['--max-position-embeddings', job.model.block_size],
    ['--micro-batch-size', micro],
    ['--global-batch-size', t.batch_size],
    ['--train-iters', t.steps],
    ['--lr', t.lr],
    ['--min-lr', t.min_lr],
    ['--lr-decay-style', 'cosine'],
    ['--lr-warmup-iters', t.warmup_steps],
    ['--lr-decay-iters', t.steps],
    ['--weight-decay', t.weight_decay],
    ['--adam-beta1', t.beta1],
    ['--adam-beta2', t.beta2],
    ['--adam-eps', t.eps],
    ['--clip-grad', t.grad_clip],
    ['--seed', t.seed],
    ['--init-method-std', 0.02],
    ['--layernorm-epsilon', 1e-5],
    ['--hidden-dropout', 0],
    ['--attention-dropout', 0],
  ];
  if (precision === 'bf16') args.push(['--bf16', null]);
  if (ls) {
    args.push(['--fp16', null]);
    if (ls.static_scale) args.push(['--loss-scale', ls.static_scale]);
    else args.push(['--initial-loss-scale', 2 ** ls.initial_scale_power], ['--loss-scale-window', ls.loss_scale_window]);
    args.push(['--hysteresis', ls.hysteresis], ['--min-loss-scale', ls.min_loss_scale]);
  }
  if (t.activation_checkpointing) args.push(['--recompute-activations', null]);
  if (tp > 1 && par.partition_activations !== false && t.activation_checkpointing) args.push(['--sequence-parallel', null]);
  const lines = [
    '# Megatron-LM arguments for this run (pretrain_gpt.py). One argument per line; pass them with',
    '#   torchrun ... pretrain_gpt.py $(grep -v "^#" megatron_args.txt) --data-path ... --tokenizer-type ...',
    `# Schedule: ${par.schedule === 'gpipe' ? 'Shardwise ran GPipe; Megatron-LM runs 1F1B (no flag selects GPipe): the same gradients, a different memory peak' : "1F1B, Megatron-LM's default"}.`,
    "# The embedding and the LM head are tied (Megatron-LM's default: no --untie-embeddings-and-output-weights).",
    ...args.map(([k, v]) => (v === null ? k : `${k} ${v}`)),
  ];
  return { deepspeed, megatron: `${lines.join('\n')}\n` };
}
