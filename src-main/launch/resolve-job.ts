// The one job resolver: what a user asks for (`shardwise train`'s flags, a --config file, the
// API's LaunchConfig) -> the TrainJob the ranks run. Precedence, for every setting: defaults <
// preset < config file (its own keys and DeepSpeed's names, which must agree) < the request. The strategy's rules are the strategy table's
// (common/strategies.ts); every refusal is a FieldError naming the LaunchConfig field, worded
// with the caller's names for fields (`--micro-batches` on the command line, `micro_batches` in
// the API). The CLI and the controller both come through here; the launch form through runs.plan.
import { existsSync, statSync } from 'node:fs';
import { totalmem } from 'node:os';
import { z } from 'zod';
import type { LaunchConfig } from '../../common/api/index.js';
import { elasticBounds } from './elastic/bounds.js';
import { DEFAULT_LOSS_SCALE, DEFAULT_PRECISION, PRECISIONS } from '../../common/precision.js';
import { API_NAMES, type FieldError, type FieldNames, type JobField, STRATEGY_NAMES, strategyOf } from '../../common/strategies.js';
import { EmulateSpecSchema, parseEmulateEnv } from '../../workers/protocol/emulate.js';
import { PRESETS } from '../../workers/protocol/presets.js';
import {
  DEFAULT_CHECKPOINT_MINUTES,
  DEFAULT_PARALLEL,
  ModelSpecSchema,
  ParallelSpecSchema,
  type TrainJob,
  TrainJobSchema,
  type TrainSpec,
  TrainSpecSchema,
} from '../../workers/protocol/train.js';
import { DeepSpeedSchema, mapDeepSpeedAll } from './deepspeed-config.js';
import { type FileSettings, fileSettings } from './file-settings.js';
import { modelStatesRefusal } from './fits-machine.js';
import { outOfRange } from './value-ranges.js';

/** A --config file: Shardwise's sections, plus DeepSpeed's top-level names (src-main/launch/deepspeed-config.ts). */
export const ConfigFileSchema = DeepSpeedSchema.strict()
  .extend({
    model: ModelSpecSchema.partial().optional(),
    train: TrainSpecSchema.partial().optional(),
    data: z.object({ dataset: z.string() }).strict().optional(),
    device: z.object({ adapter: z.string().optional() }).strict().optional(),
    parallel: ParallelSpecSchema.partial().optional(),
    strategy: z.string().optional(),
    /** Shardwise's name for the precision (DeepSpeed's bf16.enabled / fp16.enabled map to it too) */
    precision: z.enum(PRECISIONS).optional(),
    telemetry: z.object({ spans: z.boolean() }).strict().optional(),
    /** benchmarks only: an emulated device (workers/protocol/emulate.ts) */
    emulate: EmulateSpecSchema.optional(),
  })
  .strict();
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

/** What a user asks for, in the API's vocabulary: absent = the default. */
export type JobRequest = Omit<LaunchConfig, 'name' | 'placement'>;

export interface ResolveOptions {
  /** the run folder the job writes to (a function: named after the resolved preset) */
  runDir: string | ((preset: string) => string);
  file?: ConfigFile;
  /** the config file's path, for its messages */
  configName?: string;
  /** how messages name fields (default: the API's names) */
  names?: FieldNames;
  /** bytes of memory the ranks' machine has (default this machine's, os.totalmem(); null: unknown, ranks on agents) */
  machineMemory?: number | null;
}

/** The request cannot run: every error found at the first stage that failed, one a line (the first's field is the field). */
export class JobError extends Error {
  override name = 'JobError';
  readonly field: JobField;
  constructor(readonly errors: FieldError[]) {
    super(errors.map((e) => e.message).join('\n'));
    this.field = errors[0]!.field;
  }
}

const fail = (field: JobField, message: string): never => {
  throw new JobError([{ field, message }]);
};

const DEFAULT_TRAIN = {
  weight_decay: 0.1,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  grad_clip: 1.0,
  seed: 1337,
  eval_batches: 4,
  keep_checkpoints: 3,
  checkpoint_minutes: DEFAULT_CHECKPOINT_MINUTES,
  activation_checkpointing: false,
};

/** The request's training fields, where it sets them. */
const TRAIN_FIELDS = [
  'batch_size',
  'seq_len',
  'lr',
  'min_lr',
  'warmup_steps',
  'weight_decay',
  'grad_clip',
  'seed',
  'eval_interval',
  'eval_batches',
  'checkpoint_interval',
  'keep_checkpoints',
  'checkpoint_minutes',
] as const;

/** a TrainJob path (zod's) as the request's field */
function fieldOfPath(p: readonly PropertyKey[]): JobField {
  const [section, key] = p.map(String);
  if (section === 'model' && key) return `model.${key}` as JobField;
  if (section === 'data') return 'dataset';
  if (section === 'device') return 'device';
  if (section === 'telemetry') return 'spans';
  if (section === 'precision' || section === 'loss_scale') return section;
  if ((section === 'train' || section === 'parallel') && key) return key as JobField;
  return 'config';
}

/**
 * What a launch adds to resolving: a 16-bit job (every strategy trains at bf16/fp16) resolves
 * with gradient compression (runs.plan and the advisor predict its memory) but is refused at
 * launch, where the 16-bit engines would refuse it on the ranks.
 */
export function checkLaunchable(job: TrainJob, names: FieldNames = API_NAMES): void {
  const precision = job.precision ?? 'fp32';
  if (precision === 'fp32') return;
  // what the 16-bit engines do not combine with in this build (they would refuse it on the ranks)
  const hook = job.parallel?.grad_compression?.hook;
  if (hook && hook !== 'none')
    throw new JobError([
      {
        field: 'grad_compression',
        message: `${names('grad_compression')} ${hook}: a ${precision} run's gradients are 16-bit already and travel as they are; drop the compression, or train in fp32`,
      },
    ]);
}

/** A resolved job, and what the run should tell its user about the request (keys accepted without effect). */
export interface ResolvedJob {
  job: TrainJob;
  /** one line each, e.g. "config file ds.json: zero_optimization.overlap_comm false ignored: ..." */
  notes: string[];
}

/** The API sends its LaunchConfig whole: the placement says whose memory bounds the ranks'. */
type Request = JobRequest & Pick<LaunchConfig, 'placement'>;

export function resolveJob(req: Request, opts: ResolveOptions): TrainJob {
  return resolveRun(req, opts).job;
}

/**
 * The one rule, for every setting: defaults < preset < config file < request (a flag, an API
 * field). Inside the file, Shardwise's keys and DeepSpeed's names set one value each
 * (launch/file-settings.ts: two keys that disagree are refused). The file's problems come all
 * at once; so do the values out of range.
 */
export function resolveRun(req: Request, opts: ResolveOptions): ResolvedJob {
  const { file, names = API_NAMES } = opts;
  const fileName = opts.configName ? `config file ${opts.configName}` : 'config file';
  const ranges = outOfRange(req, file, fileName, names);
  if (ranges.length) throw new JobError(ranges);
  const tp = req.tp ?? file?.parallel?.tp;
  const pp = req.pp ?? file?.parallel?.pp;
  const dp = req.dp ?? file?.parallel?.dp;
  const explicitWorld = req.world ?? file?.parallel?.world;

  // DeepSpeed's batch arithmetic counts the data-parallel ranks (tensor-parallel ranks share rows)
  let fromFile: FileSettings = { parallel: {}, train: {} };
  const notes: string[] = [];
  if (file) {
    const named = req.strategy ?? file.parallel?.strategy ?? file.strategy;
    const pre = named !== undefined ? strategyOf(named) : undefined;
    const dsWorld =
      pre && !pre.knobs.has('world') ? pre.grid({ world: explicitWorld ?? pre.worldOf({ tp, pp, dp }), tp, pp, dp }).dp : explicitWorld;
    const { errors, ...ds } = mapDeepSpeedAll(file, dsWorld);
    const { settings, conflicts } = fileSettings(file, ds, fileName);
    const problems = [...errors.map((e) => ({ field: e.field, message: `${fileName}: ${e.message}` })), ...conflicts];
    if (problems.length) throw new JobError(problems);
    fromFile = settings;
    notes.push(...ds.notes.map((n) => `${fileName}: ${n}`));
  }
  const name = req.strategy ?? fromFile.strategy ?? 'single';
  const strategy = strategyOf(name);
  if (!strategy) return fail('strategy', `unknown strategy "${name}"; choose one of ${STRATEGY_NAMES.join(', ')}`);

  /** the request's fields among `keys` that it sets (an absent one leaves the file's or the default) */
  const asked = <K extends keyof JobRequest>(keys: readonly K[]) =>
    Object.fromEntries(keys.filter((k) => req[k] !== undefined).map((k) => [k, req[k]])) as Pick<JobRequest, K>;
  const parallel = {
    ...DEFAULT_PARALLEL,
    ...fromFile.parallel,
    ...asked(['schedule', 'partition', 'micro_batches', 'bucket_cap_mb', 'prefetch', 'offload_optimizer'] as const),
    strategy: strategy.name,
    world: explicitWorld ?? strategy.worldOf({ tp, pp, dp }),
    ...(tp !== undefined ? { tp } : {}),
    ...(pp !== undefined ? { pp } : {}),
    ...(dp !== undefined ? { dp } : {}),
  };
  // the grid as the trainers read it (tp's group and pp's stages are the world; 3d's axes default to 1)
  const grid = strategy.grid(parallel);
  for (const k of ['dp', 'tp', 'pp'] as const) if (strategy.knobs.has(k)) parallel[k] = grid[k];
  if (strategy.pipelined) parallel.schedule ??= '1f1b';
  if (req.grad_compression !== undefined) parallel.grad_compression = { ...parallel.grad_compression, ...req.grad_compression };

  const presetName = req.preset ?? file?.model?.preset ?? 'tiny';
  const preset = PRESETS[presetName];
  if (!preset) return fail('preset', `unknown preset "${presetName}"; choose one of ${Object.keys(PRESETS).join(', ')}`);
  const sizes = Object.fromEntries(Object.entries(req.model ?? {}).filter(([, v]) => v !== undefined));
  const model = {
    preset: presetName,
    n_layer: preset.n_layer,
    n_head: preset.n_head,
    d_model: preset.d_model,
    block_size: preset.block_size,
    ...file?.model,
    ...sizes,
  };
  const steps = req.steps ?? fromFile.train.steps ?? 200;
  const set = { ...fromFile.train, ...asked(['steps', ...TRAIN_FIELDS, 'activation_checkpointing'] as const) };
  const lr = set.lr ?? preset.lr;
  const train: Omit<TrainSpec, 'seq_len'> & { seq_len?: number } = {
    ...DEFAULT_TRAIN,
    steps,
    batch_size: preset.batch_size,
    lr,
    // a learning rate without its floor: the floor follows it
    min_lr: lr / 10,
    warmup_steps: Math.min(100, Math.floor(steps / 10)),
    eval_interval: Math.max(1, Math.floor(steps / 10)),
    // by steps, or every checkpoint_minutes, whichever comes first (a stop checkpoints too)
    checkpoint_interval: Math.max(1, Math.floor(steps / 2)),
    ...set,
  };
  // the position embedding has block_size rows: a longer sequence has no position to read
  if (train.seq_len !== undefined && train.seq_len > model.block_size)
    fail(
      'seq_len',
      `${names('seq_len')} ${train.seq_len} is longer than the model's block_size ${model.block_size} (its positions); use at most ${model.block_size} or a larger block_size`,
    );

  const precision = req.precision ?? fromFile.precision ?? DEFAULT_PRECISION;
  if (req.loss_scale !== undefined && precision !== 'fp16')
    fail(
      'loss_scale',
      `${names('loss_scale')} applies to ${names('precision')} fp16 only, and this run trains in ${precision}; drop it or train in fp16`,
    );
  const lossScale = precision === 'fp16' ? { ...DEFAULT_LOSS_SCALE, ...fromFile.loss_scale, ...req.loss_scale } : undefined;

  const spans = req.spans ?? file?.telemetry?.spans;
  // benchmarks: an emulated device from the config file or SHARDWISE_EMULATE (never a default)
  let emulate = file?.emulate;
  try {
    emulate ??= parseEmulateEnv(process.env.SHARDWISE_EMULATE);
  } catch (e) {
    fail('config', (e as Error).message);
  }
  const job = {
    run_dir: typeof opts.runDir === 'string' ? opts.runDir : opts.runDir(presetName),
    model,
    data: { dataset: req.dataset ?? file?.data?.dataset ?? 'builtin:grammar' },
    train,
    device: { adapter: req.device ?? file?.device?.adapter },
    parallel,
    precision,
    ...(lossScale ? { loss_scale: lossScale } : {}),
    ...(spans !== undefined ? { telemetry: { spans } } : {}),
    ...(emulate ? { emulate } : {}),
  };
  const errors = strategy.validate(job, names);
  if (errors.length) throw new JobError(errors);
  if (req.elastic) {
    const bounds = elasticBounds(req.elastic, job, names);
    if ('field' in bounds) throw new JobError([bounds]);
    Object.assign(job, { elastic: bounds });
  }
  const r = TrainJobSchema.safeParse(job);
  if (!r.success)
    throw new JobError(
      r.error.issues.map((i) => ({ field: fieldOfPath(i.path), message: `invalid training config: ${i.path.join('.')}: ${i.message}` })),
    );
  checkDataset(
    r.data.data.dataset,
    req.dataset !== undefined ? names('dataset') : file?.data ? `${fileName}: data.dataset` : names('dataset'),
  );
  // the machine's memory bounds the largest rank's model states (ranks placed on agents: their machines')
  const elsewhere = req.placement?.some((p) => p.machine !== 'local');
  const machine = opts.machineMemory !== undefined ? opts.machineMemory : elsewhere ? null : totalmem();
  const tooBig = machine === null ? null : modelStatesRefusal(r.data, machine);
  if (tooBig) throw new JobError([tooBig]);
  return { job: r.data, notes };
}

/** A dataset is builtin:NAME or a text file that exists (a folder passes every check until a rank reads it). */
function checkDataset(dataset: string, name: string): void {
  if (dataset.startsWith('builtin:')) return;
  if (!existsSync(dataset)) fail('dataset', `dataset file ${dataset} does not exist; give a UTF-8 text file or builtin:grammar`);
  if (!statSync(dataset).isFile())
    fail(
      'dataset',
      `${name} ${dataset} is a ${statSync(dataset).isDirectory() ? 'folder' : 'special file'}, not a text file; give a UTF-8 text file or builtin:grammar`,
    );
}
