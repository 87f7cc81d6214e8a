// The range each number a user sets may take, with sane maxima: a value past them is refused
// with the range, never clamped or wrapped (a stage delay of 1e12 ms overflows a timer and would
// run as 1 ms). Checked on the request (a flag, an API field) and on the config file's keys
// alike, before anything resolves from them; every value out of range at once.
import type { FieldError, FieldNames, JobField } from '../../common/strategies.js';
import type { JobRequest } from './resolve-job.js';

interface Range {
  /** the request's field (the API's name; the CLI's flag through FieldNames) */
  field: JobField;
  /** the config file's key, where the file sets it */
  file?: string;
  min: number;
  max: number;
  int: boolean;
}

const BILLION = 1_000_000_000;
const RANGES: Range[] = [
  { field: 'steps', file: 'train.steps', min: 1, max: BILLION, int: true },
  { field: 'batch_size', file: 'train.batch_size', min: 1, max: 65_536, int: true },
  { field: 'seq_len', file: 'train.seq_len', min: 1, max: 65_536, int: true },
  { field: 'warmup_steps', file: 'train.warmup_steps', min: 0, max: BILLION, int: true },
  { field: 'eval_interval', file: 'train.eval_interval', min: 0, max: BILLION, int: true },
  { field: 'eval_batches', file: 'train.eval_batches', min: 1, max: 1_000_000, int: true },
  { field: 'checkpoint_interval', file: 'train.checkpoint_interval', min: 0, max: BILLION, int: true },
  { field: 'keep_checkpoints', file: 'train.keep_checkpoints', min: 1, max: 1_000_000, int: true },
  { field: 'seed', file: 'train.seed', min: 0, max: Number.MAX_SAFE_INTEGER, int: true },
  { field: 'world', file: 'parallel.world', min: 1, max: 64, int: true },
  { field: 'tp', file: 'parallel.tp', min: 1, max: 64, int: true },
  { field: 'pp', file: 'parallel.pp', min: 1, max: 64, int: true },
  { field: 'dp', file: 'parallel.dp', min: 1, max: 64, int: true },
  { field: 'micro_batches', file: 'parallel.micro_batches', min: 1, max: 65_536, int: true },
  { field: 'bucket_cap_mb', file: 'parallel.bucket_cap_mb', min: 0, max: 65_536, int: false },
  { field: 'config', file: 'parallel.first_bucket_mb', min: 0, max: 65_536, int: false },
  // a timer's delay: past 2^31 - 1 ms Node fires it after 1 ms; a minute is plenty for a bubble measurement
  { field: 'config', file: 'parallel.stage_delay_ms', min: 0, max: 60_000, int: false },
  { field: 'model.n_layer', file: 'model.n_layer', min: 1, max: 1024, int: true },
  { field: 'model.n_head', file: 'model.n_head', min: 1, max: 1024, int: true },
  { field: 'model.d_model', file: 'model.d_model', min: 1, max: 65_536, int: true },
  { field: 'model.block_size', file: 'model.block_size', min: 1, max: 65_536, int: true },
];

/** "a positive integer (at most 64)", "a number from 0 to 60000" */
export function rangeText(r: { min: number; max: number; int: boolean }): string {
  if (!r.int) return `a number from ${r.min} to ${r.max}`;
  const max = r.max === Number.MAX_SAFE_INTEGER ? '' : ` (at most ${r.max})`;
  if (r.min === 1) return `a positive integer${max}`;
  if (r.min === 0) return `a non-negative integer${max}`;
  return `an integer from ${r.min} to ${r.max}`;
}

const outside = (r: Range, v: number) => v < r.min || v > r.max || (r.int && !Number.isInteger(v));

function valueAt(obj: unknown, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), obj);
}

/** Every number of the request and the file outside its range, naming the flag (or field) or the file's key. */
export function outOfRange(req: JobRequest, file: object | undefined, fileName: string, names: FieldNames): FieldError[] {
  const errors: FieldError[] = [];
  for (const r of RANGES) {
    const asked = r.field.startsWith('model.')
      ? valueAt(req.model, r.field.slice(6))
      : r.field === 'config'
        ? undefined
        : req[r.field as keyof JobRequest];
    if (typeof asked === 'number' && outside(r, asked))
      errors.push({ field: r.field, message: `${names(r.field)} must be ${rangeText(r)}, got ${asked}` });
    const filed = r.file && file ? valueAt(file, r.file) : undefined;
    if (typeof filed === 'number' && outside(r, filed))
      errors.push({ field: r.field, message: `${fileName}: ${r.file} must be ${rangeText(r)}, got ${filed}` });
  }
  return errors;
}
