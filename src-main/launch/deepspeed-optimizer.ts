// DeepSpeed's optimizer, scheduler and logging sections in a --config file, so a ds_config.json
// written for DeepSpeed runs here as it stands. Shardwise trains with one optimizer (AdamW) on
// one schedule (linear warm-up from 0 to lr, then cosine decay to min_lr at the last step:
// workers/train/schedule.ts), so:
//   optimizer {type AdamW | Adam (adam_w_mode, default true: decoupled weight decay, which is
//     AdamW)} params lr, betas [beta1, beta2], eps, weight_decay -> train.*; other types refused
//   scheduler WarmupLR -> warm-up to warmup_max_lr, then constant (min_lr = lr);
//     WarmupDecayLR -> the same, then decay to 0 over total_num_steps (along a cosine here, not a
//     line: said in a note); WarmupCosineLR -> warm-up to the optimizer's lr, cosine to
//     cos_min_ratio x lr; OneCycle and LRRangeTest refused (no such shape here)
//   what only changes the shape's start (warmup_min_lr, warmup_min_ratio, a "log" warm-up) and
//   the logging keys (steps_per_print, wall_clock_breakdown, monitors) are notes, each with why
// Hugging Face's Trainer writes "auto" for values it fills in itself: such a key is left to
// Shardwise's own value, with a note.
import { z } from 'zod';
import type { JobField } from '../../common/strategies.js';

const auto = z.literal('auto');
const num = z.union([z.number(), auto]);

export const DeepSpeedOptimizerSchema = z
  .object({
    type: z.string(),
    params: z
      .object({
        lr: num.optional(),
        betas: z.union([z.tuple([z.number(), z.number()]), auto]).optional(),
        eps: num.optional(),
        weight_decay: num.optional(),
        adam_w_mode: z.boolean().optional(),
      })
      .passthrough()
      .optional(),
  })
  .strict();

export const DeepSpeedSchedulerSchema = z
  .object({
    type: z.string(),
    params: z
      .object({
        warmup_min_lr: num.optional(),
        warmup_max_lr: num.optional(),
        warmup_num_steps: num.optional(),
        warmup_type: z.enum(['log', 'linear']).optional(),
        total_num_steps: num.optional(),
        warmup_min_ratio: z.number().min(0).max(1).optional(),
        cos_min_ratio: z.number().min(0).max(1).optional(),
        last_batch_iteration: z.number().optional(),
      })
      .passthrough()
      .optional(),
  })
  .strict();

/** Keys that only steer DeepSpeed's own logging or checks, and why Shardwise has no use for them. */
export const DEEPSPEED_LOGGING_KEYS: Record<string, string> = {
  steps_per_print: 'every step is printed and kept in metrics.jsonl',
  wall_clock_breakdown: "every step's phases are timed in spans.jsonl and the run view's timeline",
  dump_state: 'the resolved job is kept in the run folder as config.json',
  tensorboard: 'the run folder is the record; the dashboard shows it (shardwise serve)',
  wandb: 'the run folder is the record; the dashboard shows it (shardwise serve)',
  csv_monitor: 'metrics.jsonl holds every step; shardwise report --csv writes CSV',
  comms_logger: "every collective's bytes and time are in spans.jsonl",
  flops_profiler: "every step's model and hardware TFLOP/s are in metrics.jsonl",
  zero_allow_untested_optimizer: 'the optimizer is always AdamW',
  zero_force_ds_cpu_optimizer: 'ZeRO-Offload always uses the host AdamW',
  memory_breakdown: "every rank's memory by category is in metrics.jsonl",
};

export const DeepSpeedLoggingSchema = Object.fromEntries(
  Object.keys(DEEPSPEED_LOGGING_KEYS).map((k) => [k, z.unknown().optional()]),
) as Record<keyof typeof DEEPSPEED_LOGGING_KEYS, z.ZodOptional<z.ZodUnknown>>;

export interface OptimizerSettings {
  lr?: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weight_decay?: number;
  warmup_steps?: number;
  min_lr?: number;
  steps?: number;
}

/** where each setting came from, for the file's conflict messages ("scheduler.params.warmup_max_lr") */
export type OptimizerSources = Partial<Record<keyof OptimizerSettings, string>>;

interface Section {
  optimizer?: z.infer<typeof DeepSpeedOptimizerSchema>;
  scheduler?: z.infer<typeof DeepSpeedSchedulerSchema>;
  [key: string]: unknown;
}

/** the request field each setting is, for the form to highlight (the betas and eps have none: the file as a whole) */
export const OPTIMIZER_FIELD: Record<keyof OptimizerSettings, JobField> = {
  lr: 'lr',
  beta1: 'config',
  beta2: 'config',
  eps: 'config',
  weight_decay: 'weight_decay',
  warmup_steps: 'warmup_steps',
  min_lr: 'min_lr',
  steps: 'steps',
};

const isNumber = (v: unknown): v is number => typeof v === 'number';

/** The optimizer and scheduler sections as Shardwise's train settings, with notes and refusals (each naming its key). */
export function mapDeepSpeedOptimizer(
  ds: Section,
  refuse: (message: string, field?: JobField) => void,
): { train: OptimizerSettings; sources: OptimizerSources; notes: string[] } {
  const train: OptimizerSettings = {};
  const sources: OptimizerSources = {};
  const notes: string[] = [];
  /** one value per setting: two keys of the file that disagree are refused, naming both (neither silently wins) */
  const set = (k: keyof OptimizerSettings, v: number, key: string) => {
    const had = train[k];
    if (had !== undefined && had !== v) {
      refuse(`${sources[k]} ${had} and ${key} ${v} both set ${k} to different values; keep one of them`, OPTIMIZER_FIELD[k]);
      return;
    }
    train[k] = v;
    sources[k] = key;
  };
  /** a number, or "auto" left to Shardwise with a note */
  const take = (key: string, v: unknown, apply: (n: number) => void) => {
    if (v === 'auto') notes.push(`${key} "auto" ignored: it is Hugging Face Trainer's placeholder; Shardwise's own value applies`);
    else if (isNumber(v)) apply(v);
  };

  const opt = ds.optimizer;
  if (opt) {
    const type = opt.type.toLowerCase();
    const p = opt.params ?? {};
    if (type !== 'adamw' && type !== 'adam')
      refuse(`optimizer.type "${opt.type}" is not supported: Shardwise trains with AdamW; use "AdamW" (or "Adam")`, 'lr');
    else if (type === 'adam' && p.adam_w_mode === false && isNumber(p.weight_decay) && p.weight_decay > 0)
      refuse(
        'optimizer.params.adam_w_mode false (Adam with L2 weight decay) is not supported: Shardwise decouples weight decay as AdamW does; drop adam_w_mode or set weight_decay 0',
        'weight_decay',
      );
    take('optimizer.params.lr', p.lr, (v) => set('lr', v, 'optimizer.params.lr'));
    if (p.betas === 'auto') take('optimizer.params.betas', 'auto', () => {});
    else if (p.betas) {
      set('beta1', p.betas[0], 'optimizer.params.betas[0]');
      set('beta2', p.betas[1], 'optimizer.params.betas[1]');
    }
    take('optimizer.params.eps', p.eps, (v) => set('eps', v, 'optimizer.params.eps'));
    take('optimizer.params.weight_decay', p.weight_decay, (v) => set('weight_decay', v, 'optimizer.params.weight_decay'));
    for (const k of Object.keys(p))
      if (!['lr', 'betas', 'eps', 'weight_decay', 'adam_w_mode'].includes(k))
        notes.push(
          `optimizer.params.${k} ${JSON.stringify(p[k])} ignored: AdamW here runs one implementation (fused on the device, or the host's for offload)`,
        );
  }

  const sch = ds.scheduler;
  if (sch) {
    const p = sch.params ?? {};
    const key = (k: string) => `scheduler.params.${k}`;
    const type = sch.type;
    if (type === 'WarmupLR' || type === 'WarmupDecayLR' || type === 'WarmupCosineLR') {
      take(key('warmup_num_steps'), p.warmup_num_steps, (v) => set('warmup_steps', Math.round(v), key('warmup_num_steps')));
      if (p.warmup_type !== 'linear')
        notes.push(`${key('warmup_type')} "${p.warmup_type ?? 'log'}" ignored: the warm-up here is linear from 0 to lr`);
      if (type === 'WarmupCosineLR') {
        if (isNumber(p.warmup_min_ratio) && p.warmup_min_ratio > 0)
          notes.push(`${key('warmup_min_ratio')} ${p.warmup_min_ratio} ignored: the warm-up here starts at 0`);
        take(key('total_num_steps'), p.total_num_steps, (v) => set('steps', Math.round(v), key('total_num_steps')));
        const lr = train.lr;
        const ratio = p.cos_min_ratio ?? 0.0001; // DeepSpeed's default floor
        if (lr === undefined)
          refuse(
            `scheduler WarmupCosineLR's cos_min_ratio needs optimizer.params.lr in the same file: Shardwise keeps the floor as a value (min_lr = cos_min_ratio x lr)`,
            'min_lr',
          );
        else set('min_lr', ratio * lr, key('cos_min_ratio'));
      } else {
        if (isNumber(p.warmup_min_lr) && p.warmup_min_lr > 0)
          notes.push(`${key('warmup_min_lr')} ${p.warmup_min_lr} ignored: the warm-up here starts at 0`);
        take(key('warmup_max_lr'), p.warmup_max_lr, (v) => set('lr', v, key('warmup_max_lr')));
        if (type === 'WarmupLR') {
          // constant after the warm-up: the cosine's floor is the peak itself
          const lr = train.lr;
          if (lr !== undefined) set('min_lr', lr, 'scheduler.type WarmupLR');
          else notes.push('scheduler WarmupLR without warmup_max_lr or optimizer.params.lr: the default lr applies, decaying to its floor');
        } else {
          set('min_lr', 0, 'scheduler.type WarmupDecayLR');
          take(key('total_num_steps'), p.total_num_steps, (v) => set('steps', Math.round(v), key('total_num_steps')));
          notes.push('scheduler WarmupDecayLR decays to 0 along a cosine here, not along a line (Shardwise has one schedule shape)');
        }
      }
    } else {
      refuse(
        `scheduler.type "${type}" is not supported: Shardwise's schedule is a linear warm-up then a cosine decay to min_lr; WarmupLR, WarmupDecayLR and WarmupCosineLR map onto it, or set train.warmup_steps and train.min_lr`,
        'lr',
      );
    }
  }

  for (const [k, why] of Object.entries(DEEPSPEED_LOGGING_KEYS))
    if (ds[k] !== undefined) notes.push(`${k} ${JSON.stringify(ds[k])} ignored: ${why}`);
  return { train, sources, notes };
}
