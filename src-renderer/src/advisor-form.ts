// Between the launch form and the Advisor panel, both ways and pure: the runs.advise request the
// form's model, batch, sequence length and ranks make, and the form fields a picked layout's
// LaunchConfig fills in (its strategy and knobs; the model, batch and steps stay the user's
// unless the layout names them). tests/unit/advisor-form.test.ts checks both.
import type { AdviseRequest } from '../../common/advisor/types.js';
import type { LaunchConfig, LaunchPlan } from '../../common/api/index.js';
import { knobsOf } from './launch-form.js';

/** The launch form's fields the advisor reads or fills (LaunchView's reactive `f`). */
export interface AdvisorFormFields {
  preset: string;
  customSizes: boolean;
  n_layer: number;
  n_head: number;
  d_model: number;
  block_size: number;
  strategy: string;
  world: number;
  tp: number;
  pp: number;
  dp: number;
  schedule: '1f1b' | 'gpipe';
  micro_batches: number;
  offload: boolean;
  activation_checkpointing: boolean;
  batch_size: number | '';
  /** the form's precision (fp32 unless mixed precision is picked) */
  precision?: 'fp32' | 'bf16' | 'fp16';
}

/**
 * What to ask runs.advise: the form's model (preset or sizes), its batch (or the preset's, as the
 * controller resolved it), one sequence of the model's block, and its ranks (the placement where
 * the form has one, else `devices`). Null until the controller resolved the form once (the
 * batch and block of a preset come from there).
 */
export function adviseRequestOf(
  f: AdvisorFormFields,
  plan: LaunchPlan | null,
  devices: number,
  placement?: LaunchConfig['placement'],
): AdviseRequest | null {
  if (!plan) return null;
  const req: AdviseRequest = {
    batch_size: f.batch_size !== '' ? f.batch_size : plan.batch_size,
    seq_len: f.customSizes ? f.block_size : plan.model.block_size,
  };
  if (f.precision !== undefined && f.precision !== 'fp32') req.precision = f.precision;
  if (f.customSizes) req.model = { n_layer: f.n_layer, n_head: f.n_head, d_model: f.d_model, block_size: f.block_size };
  else req.preset = f.preset;
  if (placement) req.placement = placement;
  else req.devices = devices;
  return req;
}

/** The form fields a layout's LaunchConfig sets: the strategy and its knobs, micro-batches, offload, checkpointing (and the model or batch where it names them). */
export function formPatchOf(launch: LaunchConfig): Partial<AdvisorFormFields> {
  const p: Partial<AdvisorFormFields> = {};
  if (launch.strategy !== undefined) p.strategy = launch.strategy;
  const knobs = knobsOf(launch.strategy ?? 'single');
  if (launch.world !== undefined) p.world = launch.world;
  // tp and pp take their group from the world when the layout does not spell it
  if (launch.tp !== undefined) p.tp = launch.tp;
  else if (knobs.tp && !knobs.dp && launch.world !== undefined) p.tp = launch.world;
  if (launch.pp !== undefined) p.pp = launch.pp;
  else if (knobs.pp && !knobs.dp && launch.world !== undefined) p.pp = launch.world;
  if (launch.dp !== undefined) p.dp = launch.dp;
  if (launch.schedule !== undefined) p.schedule = launch.schedule;
  p.micro_batches = launch.micro_batches ?? 1;
  p.offload = launch.offload_optimizer === 'cpu';
  p.activation_checkpointing = launch.activation_checkpointing ?? false;
  if (launch.batch_size !== undefined) p.batch_size = launch.batch_size;
  if (launch.precision !== undefined) p.precision = launch.precision;
  // a preset's layout spells its sizes too: the form keeps the preset; sizes alone are a custom model
  const m = launch.model;
  if (launch.preset !== undefined) Object.assign(p, { preset: launch.preset, customSizes: false });
  else if (m?.n_layer !== undefined && m.n_head !== undefined && m.d_model !== undefined && m.block_size !== undefined)
    Object.assign(p, { customSizes: true, n_layer: m.n_layer, n_head: m.n_head, d_model: m.d_model, block_size: m.block_size });
  return p;
}
