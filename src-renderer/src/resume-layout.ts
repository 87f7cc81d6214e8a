// "Resume in another layout", pure: the runs.advise request a stopped run makes (its model, global
// batch, sequence length and precision; the devices present now), the layout a picked plan
// resumes in (runs.resume's `layout`: the global batch stays the run's), and which of the
// dialog's fields a refusal names. tests/unit/resume-layout.test.ts checks them.
import type { AdviseRequest, LayoutPlan } from '../../common/advisor/types.js';
import type { ResumeLayout } from '../../common/api/elastic.js';
import type { GptConfig } from '../../common/model-layout.js';

/** The parts of a run's config.json (the resolved job) the advisor reads. */
export interface ResumeRunConfig {
  model?: { preset?: string } & Partial<Omit<GptConfig, 'vocab_size'>>;
  train?: { batch_size?: number; seq_len?: number };
  precision?: string;
}

/** What to ask runs.advise for the run's job on `devices` ranks (absent: the controller's devices now); null when the config lacks the model or batch. */
export function resumeAdviseRequest(config: ResumeRunConfig, devices?: number): AdviseRequest | null {
  const m = config.model;
  const batch = config.train?.batch_size;
  if (!m || !m.n_layer || !m.n_head || !m.d_model || !m.block_size || !batch) return null;
  const req: AdviseRequest = {
    model: { n_layer: m.n_layer, n_head: m.n_head, d_model: m.d_model, block_size: m.block_size },
    batch_size: batch,
    seq_len: config.train?.seq_len ?? m.block_size,
  };
  if (config.precision === 'bf16' || config.precision === 'fp16') req.precision = config.precision;
  if (devices !== undefined) req.devices = devices;
  return req;
}

/** The editable fields of the dialog: the layout a plan resumes in. */
export interface ResumeFields {
  strategy: string;
  world: number;
  tp: number | '';
  pp: number | '';
  dp: number | '';
  micro_batches: number;
  schedule: '' | 'gpipe' | '1f1b';
  offload: boolean;
}

export function resumeFieldsOf(plan: LayoutPlan): ResumeFields {
  const l = plan.layout;
  return {
    strategy: l.strategy,
    world: l.world,
    tp: l.tp ?? '',
    pp: l.pp ?? '',
    dp: l.dp ?? '',
    micro_batches: l.micro_batches,
    schedule: l.schedule ?? '',
    offload: l.offload_optimizer === true,
  };
}

/** runs.resume's `layout` from the fields: the batch and precision stay the run's. */
export function resumeLayoutOf(f: ResumeFields): ResumeLayout {
  const layout: ResumeLayout = { strategy: f.strategy as ResumeLayout['strategy'], world: f.world, micro_batches: f.micro_batches };
  if (f.tp !== '') layout.tp = f.tp;
  if (f.pp !== '') layout.pp = f.pp;
  if (f.dp !== '') layout.dp = f.dp;
  if (f.schedule !== '') layout.schedule = f.schedule;
  layout.offload_optimizer = f.offload ? 'cpu' : 'none';
  return layout;
}

/** The dialog's field a refusal names: "layout.world", "config.world" or "world" -> world; offload_optimizer -> offload. */
export function refusedField(field: string | undefined): string | null {
  if (!field) return null;
  const parts = field.split('.');
  const name = parts[0] === 'layout' || parts[0] === 'config' ? parts[1] : parts[0];
  if (!name) return null;
  return name === 'offload_optimizer' ? 'offload' : name;
}
