// A resumed run in another layout: the run's own job with the layout fields the user changed
// (`train --resume RUN --strategy zero3 --world 2`, runs.resume's `layout`), checked by the same
// rules a new run's job is (the strategy table's validate, the launch checks, the machine's
// memory). Everything that is not layout (model, data, optimizer, schedule, seed, steps) stays.
// The global batch stays unless batch_size is given; micro-batches stay when they still split
// each replica's rows, else they are recomputed. What the new layout cannot carry from the old
// (a knob the new strategy does not take, fp16's loss scaler, PowerSGD's per-rank state) comes
// back as notes, one a line, for the run's summary: nothing is dropped silently. A refusal is a
// JobError naming the field and why, worded with the caller's names for fields.
import type { ResumeLayout } from '../../common/api/elastic.js';
import { DEFAULT_LOSS_SCALE } from '../../common/precision.js';
import { API_NAMES, type FieldNames, type JobField, type Knob, STRATEGY_NAMES, strategyOf } from '../../common/strategies.js';
import { precisionOf, type ParallelSpec, type TrainJob, TrainJobSchema } from '../../workers/protocol/train.js';
import { modelStatesRefusal } from './fits-machine.js';
import { checkLaunchable, JobError } from './resolve-job.js';
import { totalmem } from 'node:os';

export interface RelayoutOptions {
  /** how messages name fields (default: the API's names; the CLI passes its flags') */
  names?: FieldNames;
  /** bytes of memory the ranks' machine has (default this machine's; null: unknown, ranks on agents) */
  machineMemory?: number | null;
}

export interface Relayout {
  /** the job to resume with (a copy: the argument is not changed) */
  job: TrainJob;
  /** what changed or could not follow the layout, one line each (the CLI prints them, the summary keeps them) */
  notes: string[];
}

/** The knobs a strategy may or may not take, as ParallelSpec keys (world is every strategy's). */
const OPTIONAL_KNOBS = [
  'tp',
  'pp',
  'dp',
  'schedule',
  'partition',
  'partition_activations',
  'offload_optimizer',
  'prefetch',
  'grad_compression',
] as const;

/** knobs that are the layout itself: named by the layout line, not a note each */
const AXES: ReadonlySet<string> = new Set(['tp', 'pp', 'dp', 'schedule', 'partition']);

const fail = (field: JobField, message: string): never => {
  throw new JobError([{ field, message }]);
};

/** whether a knob's value does something (an 'none' offload or hook is the same as none) */
function knobSet(p: ParallelSpec, k: (typeof OPTIONAL_KNOBS)[number]): boolean {
  const v = p[k];
  if (v === undefined) return false;
  if (k === 'offload_optimizer') return v === 'cpu';
  if (k === 'grad_compression') return p.grad_compression!.hook !== 'none';
  if (k === 'partition_activations') return v === true;
  return true;
}

/** the largest divisor of n that is at most `most` */
function divisorAtMost(n: number, most: number): number {
  for (let d = Math.min(n, most); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

/** the layout as layout lists name it ("zero2+offload x2"); an offload of 'none' is no offload */
const describe = (p: ParallelSpec) =>
  strategyOf(p.strategy)?.label({ ...p, offload_optimizer: p.offload_optimizer === 'cpu' ? 'cpu' : undefined }, 'short') ?? p.strategy;

/**
 * The run's job in `layout` (absent fields keep the run's own), or a JobError naming the field
 * that cannot be and why. Exported signature kept stable: other launch paths (elastic restarts)
 * call it with the job a checkpoint was written by and the layout the ranks present now allow.
 */
export function relayoutJob(job: TrainJob, layout: ResumeLayout, opts: RelayoutOptions = {}): Relayout {
  const names = opts.names ?? API_NAMES;
  const notes: string[] = [];
  const old: ParallelSpec = {
    strategy: 'single',
    world: 1,
    micro_batches: 1,
    bucket_cap_mb: 0.25,
    first_bucket_mb: 0.0625,
    ...job.parallel,
  };
  const name = layout.strategy ?? old.strategy;
  const strategy = strategyOf(name);
  if (!strategy) return fail('strategy', `unknown strategy "${name}"; choose one of ${STRATEGY_NAMES.join(', ')}`);

  // knobs: the layout's, else the run's where the new strategy takes them; the rest are dropped, said so
  const parallel: ParallelSpec = {
    strategy: strategy.name,
    world: old.world,
    micro_batches: old.micro_batches,
    bucket_cap_mb: old.bucket_cap_mb,
    first_bucket_mb: old.first_bucket_mb,
    ...(old.stage_delay_ms !== undefined ? { stage_delay_ms: old.stage_delay_ms } : {}),
  };
  const given = layout as Partial<Record<(typeof OPTIONAL_KNOBS)[number], unknown>>;
  for (const k of OPTIONAL_KNOBS) {
    if (given[k] !== undefined) {
      (parallel as Record<string, unknown>)[k] = given[k];
      continue;
    }
    if (old[k] === undefined) continue;
    if (strategy.knobs.has(k as Knob)) (parallel as Record<string, unknown>)[k] = old[k];
    // the grid's axes and schedule are the layout line's (notes[0]); a behaviour knob that goes is said
    else if (knobSet(old, k) && !AXES.has(k))
      notes.push(
        `${names(k as JobField)} ${k === 'grad_compression' ? old.grad_compression!.hook : String(old[k])} is dropped: ${names('strategy')} ${strategy.name} does not take it`,
      );
  }

  // the world: the layout's (a tp or pp run's axis then follows it; a grid with a dp axis keeps its own), else what the knobs make (the replicas keep the run's)
  if (layout.world !== undefined && !strategy.knobs.has('dp'))
    for (const k of ['tp', 'pp', 'dp'] as const) if (given[k] === undefined) delete parallel[k];
  parallel.world = layout.world ?? strategy.worldOf({ world: old.world, tp: parallel.tp, pp: parallel.pp, dp: parallel.dp });
  const grid = strategy.grid(parallel);
  for (const k of ['dp', 'tp', 'pp'] as const) if (strategy.knobs.has(k)) parallel[k] = grid[k];
  if (strategy.pipelined) parallel.schedule ??= '1f1b';

  // the global batch: kept, unless given
  const train = { ...job.train };
  if (layout.batch_size !== undefined && layout.batch_size !== train.batch_size) {
    notes.push(`the global batch changes from ${train.batch_size} to ${layout.batch_size} rows per step (${names('batch_size')})`);
    train.batch_size = layout.batch_size;
  }
  // micro-batches: given, kept while they split each replica's rows, else the largest count that does (at most the run's)
  const D = grid.dp;
  if (layout.micro_batches === undefined && Number.isInteger(D) && D >= 1 && train.batch_size % D === 0) {
    const rows = train.batch_size / D;
    if (rows % old.micro_batches !== 0) {
      parallel.micro_batches = divisorAtMost(rows, old.micro_batches);
      notes.push(
        `${names('micro_batches')} ${old.micro_batches} does not split the ${rows} rows each data-parallel replica gets in the new layout; ${parallel.micro_batches} micro-batches of ${rows / parallel.micro_batches} row${rows > parallel.micro_batches ? 's' : ''} instead (the global batch stays ${train.batch_size})`,
      );
    }
  } else if (layout.micro_batches !== undefined) parallel.micro_batches = layout.micro_batches;

  // precision: the checkpoint's fp32 master weights and moments load at any; fp16's scaler starts or ends
  const from = precisionOf(job);
  const to = layout.precision ?? from;
  const out: TrainJob & { parallel: ParallelSpec } = { ...job, train, parallel, precision: to };
  delete out.loss_scale;
  if (to === 'fp16') out.loss_scale = from === 'fp16' && job.loss_scale ? job.loss_scale : { ...DEFAULT_LOSS_SCALE };
  if (to !== from) {
    notes.push(`precision ${from} -> ${to}: the checkpoint's fp32 master weights and AdamW moments continue as they are`);
    if (to === 'fp16')
      notes.push(`fp16: a fresh dynamic loss scaler starts at 2^${out.loss_scale!.initial_scale_power} (the ${from} run had none)`);
    if (from === 'fp16') notes.push(`the fp16 loss scaler is dropped: ${to} trains without loss scaling`);
  }
  // a 16-bit run's gradients travel in 16 bits already: an inherited hook goes (an explicit one is refused below)
  if (to !== 'fp32' && layout.grad_compression === undefined && knobSet(parallel, 'grad_compression')) {
    notes.push(`${names('grad_compression')} ${parallel.grad_compression!.hook} is dropped: a ${to} run's gradients are 16-bit already`);
    delete parallel.grad_compression;
  }

  // PowerSGD's error feedback and warm-start factors are per rank and per bucket: they follow no other layout
  const oldHook = knobSet(old, 'grad_compression') ? old.grad_compression!.hook : 'none';
  const newHook = knobSet(parallel, 'grad_compression') ? parallel.grad_compression!.hook : 'none';
  const sameRanks = parallel.strategy === old.strategy && parallel.world === old.world;
  if (oldHook === 'powersgd' && (newHook !== 'powersgd' || !sameRanks))
    notes.push(
      newHook === 'powersgd'
        ? `PowerSGD's per-rank error feedback and warm-start factors are reset: they belong to ${describe(old)}'s ranks and buckets, not ${describe(parallel)}'s`
        : `PowerSGD's per-rank error feedback and warm-start factors are dropped with the hook`,
    );

  const errors = strategy.validate(out, names);
  if (errors.length) throw new JobError(errors);
  const r = TrainJobSchema.safeParse(out);
  if (!r.success)
    throw new JobError(
      r.error.issues.map((i) => ({ field: 'strategy' as JobField, message: `invalid layout: ${i.path.join('.')}: ${i.message}` })),
    );
  checkLaunchable(r.data, names);
  const machine = opts.machineMemory !== undefined ? opts.machineMemory : totalmem();
  const tooBig = machine === null ? null : modelStatesRefusal(r.data, machine);
  if (tooBig) throw new JobError([tooBig]);
  if (describe(old) !== describe(parallel)) notes.unshift(`layout ${describe(old)} -> ${describe(parallel)}`);
  return { job: r.data, notes };
}
