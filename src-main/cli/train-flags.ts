// `shardwise train`'s flags: parsed into the API's JobRequest (one vocabulary for the resolver,
// src-main/launch/resolve-job.ts), and the names the resolver's messages give fields on the
// command line (`--micro-batches`; config-file keys where no flag exists).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PRECISIONS } from '../../common/precision.js';
import type { FieldNames, JobField } from '../../common/strategies.js';
import { type ConfigFile, ConfigFileSchema, type JobRequest } from '../launch/resolve-job.js';
import { CliError } from './errors.js';
import { zodIssueLines } from './zod-issues.js';
import { outDirProblem } from '../launch/out-dir.js';
import { type GradCompression, parseGradCompression } from '../../common/grad-compression.js';

const OPTIONS = {
  config: { type: 'string', multiple: true },
  preset: { type: 'string' },
  strategy: { type: 'string' },
  world: { type: 'string' },
  tp: { type: 'string' },
  dp: { type: 'string' },
  'micro-batches': { type: 'string' },
  pp: { type: 'string' },
  schedule: { type: 'string' },
  partition: { type: 'string' },
  'bucket-cap-mb': { type: 'string' },
  'offload-optimizer': { type: 'string' },
  prefetch: { type: 'string' },
  precision: { type: 'string' },
  'grad-compression': { type: 'string' },
  'powersgd-start-iter': { type: 'string' },
  steps: { type: 'string' },
  dataset: { type: 'string' },
  seed: { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  'batch-size': { type: 'string' },
  'seq-len': { type: 'string' },
  lr: { type: 'string' },
  'min-lr': { type: 'string' },
  'warmup-steps': { type: 'string' },
  'weight-decay': { type: 'string' },
  'grad-clip': { type: 'string' },
  'eval-interval': { type: 'string' },
  'eval-batches': { type: 'string' },
  'checkpoint-interval': { type: 'string' },
  'keep-checkpoints': { type: 'string' },
  'checkpoint-minutes': { type: 'string' },
  'activation-checkpointing': { type: 'boolean' },
  device: { type: 'string' },
  resume: { type: 'string' },
  'init-from': { type: 'string' },
  placement: { type: 'string' },
  elastic: { type: 'string' },
  'max-restarts': { type: 'string' },
} as const;

/** Fields that have no flag of their own: their config-file key names them. */
const NO_FLAG: Partial<Record<JobField, string>> = {
  config: 'config file',
  spans: 'telemetry.spans',
  loss_scale: "fp16 (the config file's loss scaling)",
  partition_activations: 'activation_checkpointing.partition_activations',
  // settable both ways: the flag and the key
  partition: '--partition (parallel.partition)',
  elastic: '--elastic',
  'model.n_layer': 'model.n_layer',
  'model.n_head': 'model.n_head',
  'model.d_model': 'model.d_model',
  'model.block_size': 'model.block_size',
};

/** Every rank runs on this machine (no --placement, or only `local` entries): its memory bounds theirs. */
export function placedHere(placement: string | undefined): boolean {
  return placement === undefined || placement.split(',').every((p) => p.trim().split('@')[0] === 'local');
}

/** How the resolver's messages name a field on the command line. */
export const FLAG_NAMES: FieldNames = (f) => NO_FLAG[f] ?? `--${f.replace(/_/g, '-')}`;

export interface TrainArgs {
  request: JobRequest;
  file?: ConfigFile;
  configName?: string;
  out?: string;
  json: boolean;
  resume?: string;
  /** --init-from: a Hugging Face GPT-2 folder to start the new run's weights from */
  initFrom?: string;
  placement?: string;
}

/** an integer flag at least `min` (1: "a positive integer"); maxima are the resolver's (launch/value-ranges.ts) */
function int(name: string, v: string | undefined, min: 0 | 1 = 1): number | undefined {
  if (v === undefined) return undefined;
  const what = min === 1 ? 'a positive integer' : 'a non-negative integer';
  if (!/^-?\d+$/.test(v)) throw new CliError(`--${name} must be ${what}, got "${v}"`);
  const n = Number(v);
  if (n < min) throw new CliError(`--${name} must be ${what}, got ${v}`);
  return n;
}

/** a number flag: positive (> 0) or non-negative */
function num(name: string, v: string | undefined, sign: 'positive' | 'non-negative' = 'non-negative'): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new CliError(`--${name} must be a ${sign} number, got "${v}"`);
  if (sign === 'positive' ? n <= 0 : n < 0) throw new CliError(`--${name} must be a ${sign} number, got ${v}`);
  return n;
}

/**
 * `--steps -5` as `--steps=-5`: parseArgs reads a value starting with "-" as an option and says
 * only "argument is ambiguous"; joined, the flag's own check says what is allowed.
 */
function joinNegativeValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const opt = a.startsWith('--') ? OPTIONS[a.slice(2) as keyof typeof OPTIONS] : undefined;
    const next = argv[i + 1];
    if (opt?.type === 'string' && next !== undefined && /^-(\d|\.\d|Infinity)/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** minutes: a number >= 0 (0 = off) */
function minutes(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new CliError(`--${name} must be 0 (off) or a positive number of minutes, got "${v}"`);
  return n;
}

function oneOf<T extends string>(name: string, v: string | undefined, values: readonly T[]): T | undefined {
  if (v === undefined) return undefined;
  if (!(values as readonly string[]).includes(v)) throw new CliError(`--${name} must be ${values.join(' or ')}, got "${v}"`);
  return v as T;
}

/** --grad-compression none|fp16|bf16|powersgd[:R] and --powersgd-start-iter N -> the request's setting */
function gradCompression(text: string | undefined, startIter: number | undefined): GradCompression | undefined {
  if (text === undefined) {
    if (startIter !== undefined) throw new CliError('--powersgd-start-iter needs --grad-compression powersgd[:R]');
    return undefined;
  }
  const g = parseGradCompression(text);
  if (!g)
    throw new CliError(`--grad-compression must be none, fp16, bf16, powersgd or powersgd:R (R a rank from 1 to 1024), got "${text}"`);
  if (startIter === undefined) return g;
  if (g.hook !== 'powersgd') throw new CliError(`--powersgd-start-iter applies to --grad-compression powersgd[:R], not ${g.hook}`);
  return { ...g, start_powerSGD_iter: startIter };
}

function readJsonFile(file: string): unknown {
  if (!existsSync(file) || !statSync(file).isFile()) throw new CliError(`config file ${file} does not exist`);
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new CliError(`config file ${file} is not valid JSON: ${(e as Error).message}`);
  }
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** b over a: objects merge key by key, anything else in b replaces a's */
function mergeOver(a: unknown, b: unknown): unknown {
  if (!isObject(a) || !isObject(b)) return b;
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in a ? mergeOver(a[k], v) : v;
  return out;
}

/**
 * One or more config files, merged in the order given: a later file's keys replace an earlier
 * one's (objects merge key by key), so a shared model file and a run's own file combine.
 */
export function readConfigFile(...files: string[]): ConfigFile {
  const raw = files.map(readJsonFile).reduce(mergeOver);
  const r = ConfigFileSchema.safeParse(raw);
  // every problem of the file, one a line, each naming the file and the key
  if (!r.success) throw new CliError(zodIssueLines(`config file ${files.join(' + ')}`, r.error.issues).join('\n'));
  return r.data;
}

/** --elastic MIN:MAX and --max-restarts N -> the request's elastic bounds (their rules against the run: launch/elastic/bounds.ts) */
function elastic(text: string | undefined, restarts: number | undefined): JobRequest['elastic'] {
  if (text === undefined) {
    if (restarts !== undefined) throw new CliError('--max-restarts applies to an elastic run; add --elastic MIN:MAX');
    return undefined;
  }
  const m = /^(\d+):(\d+)$/.exec(text.trim());
  if (!m) throw new CliError(`--elastic must be MIN:MAX, the ranks the run may shrink to and grow back to (e.g. 2:3), got "${text}"`);
  const [min, max] = [Number(m[1]), Number(m[2])];
  if (min < 1) throw new CliError(`--elastic ${text}: MIN must be at least 1 rank`);
  if (min > max) throw new CliError(`--elastic ${text}: MIN must be at most MAX (e.g. 2:3)`);
  return { min, max, ...(restarts !== undefined ? { max_restarts: restarts } : {}) };
}

/** argv -> the request (values checked for their type, naming the flag); the rules are the resolver's. */
export function parseTrainArgs(argv: string[]): TrainArgs {
  let v;
  try {
    v = parseArgs({ args: joinNegativeValues(argv), strict: true, allowPositionals: false, options: OPTIONS }).values;
  } catch (e) {
    throw new CliError(`${(e as Error).message.split('\n')[0]}. Run 'shardwise train --help' for the flags.`);
  }
  // several files merge in the order given (readConfigFile): the last one's keys win
  const configs = v.config ?? [];
  if (v.out !== undefined) {
    const problem = outDirProblem(v.out);
    if (problem) throw new CliError(`--out ${v.out}: ${problem}`);
  }
  const prefetch = oneOf('prefetch', v.prefetch, ['on', 'off'] as const);
  const request: JobRequest = {
    preset: v.preset,
    dataset: v.dataset,
    strategy: v.strategy,
    world: int('world', v.world),
    tp: int('tp', v.tp),
    pp: int('pp', v.pp),
    dp: int('dp', v.dp),
    schedule: oneOf('schedule', v.schedule, ['gpipe', '1f1b'] as const),
    partition: oneOf('partition', v.partition, ['params', 'time'] as const),
    micro_batches: int('micro-batches', v['micro-batches']),
    bucket_cap_mb: num('bucket-cap-mb', v['bucket-cap-mb']),
    offload_optimizer: oneOf('offload-optimizer', v['offload-optimizer'], ['cpu', 'none'] as const),
    prefetch: prefetch === undefined ? undefined : prefetch === 'on',
    precision: oneOf('precision', v.precision, PRECISIONS),
    grad_compression: gradCompression(v['grad-compression'], int('powersgd-start-iter', v['powersgd-start-iter'], 0)),
    steps: int('steps', v.steps),
    batch_size: int('batch-size', v['batch-size']),
    seq_len: int('seq-len', v['seq-len']),
    lr: num('lr', v.lr, 'positive'),
    min_lr: num('min-lr', v['min-lr']),
    warmup_steps: int('warmup-steps', v['warmup-steps'], 0),
    weight_decay: num('weight-decay', v['weight-decay']),
    grad_clip: num('grad-clip', v['grad-clip']),
    seed: int('seed', v.seed, 0),
    eval_interval: int('eval-interval', v['eval-interval'], 0),
    eval_batches: int('eval-batches', v['eval-batches']),
    checkpoint_interval: int('checkpoint-interval', v['checkpoint-interval'], 0),
    keep_checkpoints: int('keep-checkpoints', v['keep-checkpoints']),
    checkpoint_minutes: minutes('checkpoint-minutes', v['checkpoint-minutes']),
    activation_checkpointing: v['activation-checkpointing'],
    device: v.device,
    elastic: elastic(v.elastic, int('max-restarts', v['max-restarts'], 0)),
  };
  return {
    request,
    ...(configs.length ? { file: readConfigFile(...configs), configName: configs.join(' + ') } : {}),
    out: v.out,
    json: v.json ?? false,
    resume: v.resume,
    initFrom: v['init-from'],
    placement: v.placement,
  };
}
