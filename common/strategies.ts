// The strategy table: for each strategy, the knobs a job may set, how many ranks they make
// (the world-size rule), the grid those ranks form and so how many ways the global batch splits
// (the data-parallel divisor), and validate(job): every rule that ties the knobs to each other
// and to the model, as field-tagged errors. The one place these rules live: the CLI and the
// controller resolve jobs through it (src-main/launch/resolve-job.ts), the launch form shows a
// strategy's knobs and each rank's role from it, the memory formulas and the run summary read
// its grid. Pure: no runtime imports.
import { type GptConfig, gridCoords, type GridShape } from './model-layout.js';

export const STRATEGY_NAMES = ['single', 'dp', 'ddp', 'zero1', 'zero2', 'zero3', 'tp', 'pp', '3d'] as const;
export type StrategyName = (typeof STRATEGY_NAMES)[number];

/** A job field as the API's LaunchConfig spells it (the model's sizes under `model.`). */
export type JobField =
  | 'config'
  | 'preset'
  | 'dataset'
  | 'device'
  | 'strategy'
  | 'world'
  | 'tp'
  | 'pp'
  | 'dp'
  | 'schedule'
  | 'partition'
  | 'partition_activations'
  | 'spans'
  | 'micro_batches'
  | 'bucket_cap_mb'
  | 'offload_optimizer'
  | 'precision'
  | 'loss_scale'
  | 'prefetch'
  | 'grad_compression'
  | 'steps'
  | 'batch_size'
  | 'seq_len'
  | 'lr'
  | 'min_lr'
  | 'warmup_steps'
  | 'weight_decay'
  | 'grad_clip'
  | 'seed'
  | 'eval_interval'
  | 'eval_batches'
  | 'checkpoint_interval'
  | 'keep_checkpoints'
  | 'checkpoint_minutes'
  | 'activation_checkpointing'
  | 'elastic'
  | 'model.n_layer'
  | 'model.n_head'
  | 'model.d_model'
  | 'model.block_size';

/** One broken rule: the field to change, and what is wrong and what to do (naming fields as `name` spells them). */
export interface FieldError {
  field: JobField;
  message: string;
}

/** How a message names a field: `--micro-batches` on the command line, `micro_batches` in the API. */
export type FieldNames = (field: JobField) => string;

/** The API's names: the fields themselves. */
export const API_NAMES: FieldNames = (f) => f;

/** The ranks' grid (Megatron's order tp-dp-pp: rank = pp*(D*T) + dp*T + tp; common/model-layout.ts). */
export type Grid = GridShape;

/** The parallel part of a job as the table reads it (TrainJob's `parallel` section is one). */
export interface ParallelShape {
  strategy: string;
  world: number;
  micro_batches: number;
  tp?: number;
  pp?: number;
  dp?: number;
  schedule?: string;
  partition?: string;
  offload_optimizer?: string;
  prefetch?: boolean;
  partition_activations?: boolean;
  grad_compression?: { hook: string };
}

/** What a label needs of a layout or a job's parallel section. */
export interface LabelShape extends Pick<ParallelShape, 'world' | 'tp' | 'pp' | 'dp' | 'schedule'> {
  micro_batches?: number;
  /** a job's offload device ('cpu') or a layout's flag */
  offload_optimizer?: string | boolean;
}

/** What validate reads of a job (a TrainJob is one). */
export interface JobShape {
  model: Pick<GptConfig, 'n_layer' | 'n_head' | 'd_model'>;
  train: { batch_size: number };
  parallel: ParallelShape;
  telemetry?: { spans: boolean };
}

/** Knobs that only some strategies have (the common ones, steps, batch size, micro-batches..., every strategy has). */
export type Knob =
  | 'world'
  | 'tp'
  | 'pp'
  | 'dp'
  | 'schedule'
  | 'partition'
  | 'partition_activations'
  | 'bucket_cap_mb'
  | 'offload_optimizer'
  | 'prefetch'
  | 'grad_compression';

export interface Strategy {
  name: StrategyName;
  /** the knobs this strategy takes (the launch form shows only these; a job that sets another is refused) */
  knobs: ReadonlySet<Knob>;
  /** micro-batches flow through pipeline stages: a schedule, a bubble measured from the spans */
  pipelined: boolean;
  /** the ranks split the model's tensors (tp, pp, 3d): memory follows the tensors, not Ψ / N */
  splitsModel: boolean;
  /** the field whose value is the data-parallel divisor (the ranks that split the batch) */
  dataParallelField: 'world' | 'dp' | null;
  /** ZeRO stage of the replicas (1: optimizer states, 2: + gradients, 3: + parameters sharded over the ranks); 0 for none */
  zeroStage: 0 | 1 | 2 | 3;
  /** which ranks run the optimizer: every rank, or rank 0 alone (dp's parameter server, which broadcasts the weights) */
  optimizerRanks: 'every' | 'rank0';
  /** one rank in the launching process: no world to join, no collectives (single) */
  oneRank: boolean;
  /** the replicas all-reduce their gradients bucket by bucket while backward runs (DDP's buckets, where a comm hook applies) */
  bucketAllReduce: boolean;
  /** a rank's stage is split over a tensor-parallel group (tp: every rank; 3d: the grid's tp axis) */
  tensorParallel: boolean;
  /**
   * The strategy and its grid in words, in one of three styles: 'short' for layout lists
   * ("zero2+offload x4", "pp 2 m4 1f1b", "3d 2x2x2 m2 gpipe"), 'form' as the launch form puts it
   * ("zero2 × 4", "pp P 2", "3d D 2 × T 2 × P 2") and 'grid' for a run's topology ("4 ranks",
   * "DP 2 × TP 2 × PP 2"; null for one device).
   */
  label(p: LabelShape, style: 'short' | 'form' | 'grid'): string | null;
  /** ranks the knobs make when the job does not give its world */
  worldOf(k: Partial<Pick<ParallelShape, 'world' | 'tp' | 'pp' | 'dp'>>): number;
  /** the grid of a job's ranks; grid.dp is the data-parallel divisor of the global batch */
  grid(p: Pick<ParallelShape, 'world' | 'tp' | 'pp' | 'dp'>): Grid;
  /**
   * The knobs that lay the strategy over `world` ranks, its other axes kept (an elastic run's
   * survivors): replicas at world, tp and pp at that many shards or stages, 3d fewer
   * data-parallel replicas of its tp x pp cell; null when the grid cannot take that many.
   */
  atWorld(p: Pick<ParallelShape, 'tp' | 'pp'>, world: number): Pick<ParallelShape, 'world' | 'tp' | 'pp' | 'dp'> | null;
  /** what rank `rank` does, for the launch form's placement table */
  role(g: Grid, rank: number): string;
  /** every broken rule, the most basic first (world before the model, the model before the batch) */
  validate(job: JobShape, name?: FieldNames): FieldError[];
}

type Rule = (job: JobShape, s: Strategy, name: FieldNames) => FieldError | null;

/** Where a knob that is set applies, and why (for the message refusing it elsewhere). */
const KNOB_USE: Partial<Record<Knob, { isSet: (p: ParallelShape) => boolean; verb: string; value?: string; why: string }>> = {
  tp: { isSet: (p) => p.tp !== undefined, verb: 'applies to', why: 'tensor parallelism' },
  pp: { isSet: (p) => p.pp !== undefined, verb: 'applies to', why: 'pipeline stages' },
  dp: { isSet: (p) => p.dp !== undefined, verb: 'applies to', why: 'data-parallel replicas of a tensor- and pipeline-parallel model' },
  schedule: { isSet: (p) => p.schedule !== undefined, verb: 'applies to', why: 'the order of forwards and backwards on each stage' },
  partition: { isSet: (p) => p.partition !== undefined, verb: 'applies to', why: 'how blocks are split into pipeline stages' },
  prefetch: { isSet: (p) => p.prefetch !== undefined, verb: 'applies to', why: "it gathers the next layer's weights early" },
  offload_optimizer: {
    isSet: (p) => p.offload_optimizer === 'cpu',
    verb: 'needs',
    value: 'cpu',
    why: 'ZeRO-Offload moves the sharded optimizer to the host',
  },
  grad_compression: {
    isSet: (p) => p.grad_compression !== undefined && p.grad_compression.hook !== 'none',
    verb: 'applies to',
    why: "it compresses DDP's gradient all-reduce or ZeRO-1/2's gradient reduce-scatter",
  },
  partition_activations: {
    isSet: (p) => p.partition_activations === true,
    verb: 'needs',
    why: 'it splits checkpointed activations over the tensor-parallel ranks',
  },
};

/** why a knob does not fit one strategy that might seem to take it */
const NOT_FOR: Partial<Record<Knob, Partial<Record<StrategyName, string>>>> = {
  partition: { '3d': '3d stages are split by parameter count' },
};

const owners = (k: Knob) => STRATEGY_NAMES.filter((n) => TABLE[n].knobs.has(k));

/** a knob set on a strategy that does not take it */
const knobsApply: Rule = (job, s, name) => {
  for (const [k, use] of Object.entries(KNOB_USE) as [Knob, NonNullable<(typeof KNOB_USE)[Knob]>][]) {
    if (s.knobs.has(k) || !use.isSet(job.parallel)) continue;
    const why = NOT_FOR[k]?.[s.name];
    return {
      field: k,
      message: `${name(k)}${use.value ? ` ${use.value}` : ''} ${use.verb} ${name('strategy')} ${owners(k).join(' or ')} (${use.why}); got ${name('strategy')} ${s.name}${why ? `: ${why}` : ''}`,
    };
  }
  return null;
};

const worldAtLeastOne: Rule = (job, _s, name) =>
  job.parallel.world >= 1 ? null : { field: 'world', message: `${name('world')} must be at least 1` };

const worldIsOne: Rule = (job, _s, name) =>
  job.parallel.world === 1
    ? null
    : {
        field: 'world',
        message: `${name('world')} ${job.parallel.world} needs a distributed strategy (dp or ddp); ${name('strategy')} single runs one rank`,
      };

/** tp: every rank is one tensor-parallel shard */
const worldIsTp: Rule = (job, _s, name) => {
  const { world, tp } = job.parallel;
  if (tp !== undefined && tp < 1) return { field: 'tp', message: `${name('tp')} must be at least 1` };
  if (tp !== undefined && tp !== world)
    return {
      field: 'world',
      message: `${name('world')} ${world} must equal ${name('tp')} ${tp}: with ${name('strategy')} tp every rank holds one tensor-parallel shard (data parallelism on top is ${name('strategy')} 3d)`,
    };
  return null;
};

/** pp: every rank is one pipeline stage, and a pipeline has two at least */
const worldIsPp: Rule = (job, _s, name) => {
  const { world, pp } = job.parallel;
  if (pp !== undefined && pp !== world)
    return {
      field: 'world',
      message: `${name('world')} ${world} must equal ${name('pp')} ${pp} (every rank is one pipeline stage); leave out ${name('world')}`,
    };
  if (world < 2) return { field: 'pp', message: `${name('pp')} must be at least 2 (pipeline stages), got ${world}` };
  return null;
};

/** 3d: D x T x P ranks, each a cell of the grid */
const worldIsGrid: Rule = (job, s, name) => {
  const g = s.grid(job.parallel);
  for (const k of ['dp', 'tp', 'pp'] as const) {
    if (!Number.isInteger(g[k]) || g[k] < 1) return { field: k, message: `${name(k)} must be a positive integer, got ${g[k]}` };
  }
  const n = g.dp * g.tp * g.pp;
  if (n === job.parallel.world) return null;
  return {
    field: 'world',
    message: `${name('dp')} x ${name('tp')} x ${name('pp')} = ${g.dp} x ${g.tp} x ${g.pp} = ${n} must equal ${name('world')} (${job.parallel.world}): every rank is one cell of the grid; change ${name('dp')}/${name('tp')}/${name('pp')} or ${name('world')}`,
  };
};

/** the spans are how a pipeline's bubble is measured */
const spansKept: Rule = (job, s, name) =>
  s.pipelined && job.telemetry?.spans === false
    ? {
        field: 'spans',
        message: `${name('spans')} false does not apply to ${name('strategy')} ${s.name}: the pipeline bubble is measured from its spans`,
      }
    : null;

/** tensor parallelism splits attention by whole heads */
const headsSplit: Rule = (job, s, name) => {
  const T = s.grid(job.parallel).tp;
  const h = job.model.n_head;
  if (T <= 1 || h % T === 0) return null;
  return {
    field: 'tp',
    message: `${name('model.n_head')} (${h}) must be divisible by ${name('tp')} ${T}: each rank computes whole attention heads; pick ${name('tp')} among the divisors of ${h} or a model with more heads`,
  };
};

/** every pipeline stage holds one block at least */
const layersSplit: Rule = (job, s, name) => {
  const P = s.grid(job.parallel).pp;
  const L = job.model.n_layer;
  if (P <= 1 || L >= P) return null;
  return {
    field: 'pp',
    message: `${name('model.n_layer')} ${L} is smaller than ${name('pp')} ${P}: every pipeline stage needs at least one block; lower ${name('pp')} or raise ${name('model.n_layer')}`,
  };
};

/** the global batch splits into whole rows for each data-parallel rank, then into whole micro-batches */
const batchSplits: Rule = (job, s, name) => {
  const B = job.train.batch_size;
  const M = job.parallel.micro_batches;
  const D = s.grid(job.parallel).dp;
  if (B % (D * M) === 0) return null;
  const by = D > 1 ? `${s.dataParallelField} ${D} x micro-batches ${M}` : `${name('micro_batches')} ${M}`;
  return {
    field: D > 1 && B % D !== 0 ? s.dataParallelField! : 'micro_batches',
    message: `batch size ${B} is not divisible by ${by}; pick ${name('batch_size')} as a multiple of ${D * M}`,
  };
};

/** ZeRO reduce-scatters its gradients: a 16-bit cast applies (fp16, bf16), PowerSGD's low-rank approximation does not */
const zeroCompression: Rule = (job, s, name) =>
  s.zeroStage > 0 && s.knobs.has('grad_compression') && job.parallel.grad_compression?.hook === 'powersgd'
    ? {
        field: 'grad_compression',
        message: `${name('grad_compression')} powersgd does not apply to ${name('strategy')} ${s.name}: ZeRO reduce-scatters the gradients so each rank receives only the sum of its own shard, while PowerSGD's low-rank factors P and Q must be all-reduced whole (every rank needs all of them to rebuild any shard); use fp16 or bf16 with ${s.name}, or ${name('strategy')} ddp for PowerSGD`,
      }
    : null;

const MODEL_RULES: Rule[] = [spansKept, headsSplit, layersSplit, batchSplits];

function strategy(
  name: StrategyName,
  knobs: Knob[],
  shape: Pick<Strategy, 'pipelined' | 'splitsModel' | 'dataParallelField' | 'worldOf' | 'grid' | 'atWorld' | 'role' | 'label'> &
    Partial<Pick<Strategy, 'zeroStage' | 'optimizerRanks' | 'oneRank' | 'bucketAllReduce' | 'tensorParallel'>>,
  worldRule: Rule,
): Strategy {
  const s: Strategy = {
    name,
    knobs: new Set(knobs),
    zeroStage: 0,
    optimizerRanks: 'every',
    oneRank: false,
    bucketAllReduce: false,
    tensorParallel: false,
    ...shape,
    validate(job, names = API_NAMES) {
      return [knobsApply, worldAtLeastOne, worldRule, zeroCompression, ...MODEL_RULES].flatMap((r) => r(job, s, names) ?? []);
    },
  };
  return s;
}

/** A pipeline's micro-batches and schedule, as layout lists name them: "m4 1f1b". */
const pipeText = (p: LabelShape) => `m${p.micro_batches ?? 1} ${p.schedule ?? '1f1b'}`;

/** data parallelism of every kind: each rank a replica (or a ZeRO shard of one) on its rows of the batch */
const REPLICAS = (
  name: StrategyName,
  knobs: Knob[],
  more: Partial<Pick<Strategy, 'zeroStage' | 'optimizerRanks' | 'bucketAllReduce'>> = {},
) =>
  strategy(
    name,
    ['world', ...knobs],
    {
      pipelined: false,
      splitsModel: false,
      dataParallelField: 'world',
      worldOf: (k) => k.world ?? 2,
      grid: (p) => ({ dp: p.world, tp: 1, pp: 1 }),
      atWorld: (_p, world) => ({ world }),
      role: (_g, rank) => `replica ${rank}`,
      label: (p, style) =>
        style === 'short'
          ? `${name}${p.offload_optimizer ? '+offload' : ''} x${p.world}`
          : style === 'form'
            ? `${name} × ${p.world}`
            : `${p.world} ranks`,
      ...more,
    },
    () => null,
  );

export const TABLE: Record<StrategyName, Strategy> = {
  single: strategy(
    'single',
    [],
    {
      pipelined: false,
      splitsModel: false,
      dataParallelField: null,
      oneRank: true,
      worldOf: () => 1,
      grid: () => ({ dp: 1, tp: 1, pp: 1 }),
      atWorld: (_p, world) => ({ world }), // its rule then refuses any world but 1
      role: () => 'the only rank',
      label: (p, style) => (style === 'short' ? 'single' : style === 'form' ? `single × ${p.world}` : null),
    },
    worldIsOne,
  ),
  /** parameter server: rank 0 gathers the gradients, updates, broadcasts the weights */
  dp: REPLICAS('dp', [], { optimizerRanks: 'rank0' }),
  ddp: REPLICAS('ddp', ['bucket_cap_mb', 'grad_compression'], { bucketAllReduce: true }),
  zero1: REPLICAS('zero1', ['offload_optimizer', 'grad_compression'], { zeroStage: 1 }),
  zero2: REPLICAS('zero2', ['bucket_cap_mb', 'offload_optimizer', 'grad_compression'], { zeroStage: 2 }),
  zero3: REPLICAS('zero3', ['bucket_cap_mb', 'prefetch'], { zeroStage: 3 }),
  tp: strategy(
    'tp',
    ['tp', 'partition_activations'],
    {
      pipelined: false,
      splitsModel: true,
      tensorParallel: true,
      dataParallelField: null,
      worldOf: (k) => k.tp ?? 2,
      grid: (p) => ({ dp: 1, tp: p.tp ?? p.world, pp: 1 }),
      atWorld: (_p, world) => ({ world, tp: world }),
      role: (g, rank) => `shard ${rank} of ${g.tp}`,
      label: (p, style) =>
        style === 'short' ? `tp ${p.tp ?? p.world}` : style === 'form' ? `tp T ${p.tp ?? p.world}` : `${p.world} ranks`,
    },
    worldIsTp,
  ),
  pp: strategy(
    'pp',
    ['pp', 'schedule', 'partition'],
    {
      pipelined: true,
      splitsModel: true,
      dataParallelField: null,
      worldOf: (k) => k.pp ?? 2,
      grid: (p) => ({ dp: 1, tp: 1, pp: p.pp ?? p.world }),
      atWorld: (_p, world) => ({ world, pp: world }),
      role: (g, rank) => `stage ${rank} of ${g.pp}`,
      label: (p, style) =>
        style === 'short' ? `pp ${p.pp ?? p.world} ${pipeText(p)}` : style === 'form' ? `pp P ${p.pp ?? p.world}` : `${p.world} ranks`,
    },
    worldIsPp,
  ),
  '3d': strategy(
    '3d',
    ['dp', 'tp', 'pp', 'schedule', 'partition_activations'],
    {
      pipelined: true,
      splitsModel: true,
      tensorParallel: true,
      dataParallelField: 'dp',
      worldOf: (k) => (k.dp ?? 1) * (k.tp ?? 1) * (k.pp ?? 1),
      grid: (p) => ({ dp: p.dp ?? 1, tp: p.tp ?? 1, pp: p.pp ?? 1 }),
      atWorld: (p, world) => {
        const cell = (p.tp ?? 1) * (p.pp ?? 1);
        const dp = Math.floor(world / cell);
        return dp >= 1 && dp * cell === world ? { world, dp } : null;
      },
      role: (g, rank) => {
        const c = gridCoords(g, rank);
        return `dp ${c.dp} · tp ${c.tp} · stage ${c.pp}`;
      },
      label: (p, style) => {
        const [dp, tp, pp] = [p.dp ?? 1, p.tp ?? 1, p.pp ?? 1];
        if (style === 'short') return `3d ${dp}x${tp}x${pp} ${pipeText(p)}`;
        return style === 'form' ? `3d D ${dp} × T ${tp} × P ${pp}` : `DP ${dp} × TP ${tp} × PP ${pp}`;
      },
    },
    worldIsGrid,
  ),
};

export function isStrategyName(s: string): s is StrategyName {
  return Object.prototype.hasOwnProperty.call(TABLE, s);
}

/** The table's entry for a strategy name, or undefined for an unknown one. */
export function strategyOf(name: string): Strategy | undefined {
  return isStrategyName(name) ? TABLE[name] : undefined;
}

/** The data-parallel strategy at ZeRO stage `stage` (0: ddp's replicas), as DeepSpeed's zero_optimization.stage names it. */
export function strategyAtZeroStage(stage: number): StrategyName | undefined {
  return STRATEGY_NAMES.find((n) => {
    const s = TABLE[n];
    return s.zeroStage === stage && !s.splitsModel && !s.oneRank && s.optimizerRanks === 'every';
  });
}
