// runs.export's decisions before anything is written: which checkpoint, whether the layout is one
// the strategy table accepts for the run's batch (the checks `shardwise export` makes, here with
// the API's field names so the dialog outlines the field), the folder names, and the worker's
// flags. Pure: the service reads the run folder and runs the worker (export-worker.ts).
import { gradCompressionLabel } from '../../common/grad-compression.js';
import type { ExportLayout } from '../../common/api/export-job.js';
import { RUN_ID_RE } from '../../common/api/launch-config.js';
import { STRATEGY_NAMES, TABLE, type StrategyName } from '../../common/strategies.js';
import { DEFAULT_PARALLEL, type ParallelSpec, type TrainJob } from '../../workers/protocol/train.js';

/** A refused export: `field` is the params path the dialog outlines (`checkpoint`, `layout.world`). */
export class ExportRequestError extends Error {
  override name = 'ExportRequestError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** Where exports go inside the runs root: a folder that is not a run (it has no state.json), so the runs list skips it. */
export const EXPORTS_DIR = 'exports';

/**
 * The checkpoint to export: the one asked for, else the latest before the run's last step (a
 * checkpoint at the last step leaves nothing to train). `checkpoints`: the run's, ascending.
 */
export function exportCheckpoint(checkpoints: number[], steps: number, asked: number | undefined): number {
  const usable = checkpoints.filter((s) => s < steps);
  if (asked !== undefined) {
    if (!checkpoints.includes(asked))
      throw new ExportRequestError(
        'checkpoint',
        checkpoints.length
          ? `the run has no checkpoint at step ${asked}; its checkpoints are at steps ${checkpoints.join(', ')}`
          : `the run has no checkpoint (train with a checkpoint interval, or resume it until it saves one)`,
      );
    if (asked >= steps)
      throw new ExportRequestError(
        'checkpoint',
        `the checkpoint at step ${asked} is the run's last (steps ${steps}): nothing is left to train; pick an earlier one${usable.length ? ` (${usable.join(', ')})` : ''}`,
      );
    return asked;
  }
  const latest = usable[usable.length - 1];
  if (latest === undefined)
    throw new ExportRequestError(
      'checkpoint',
      checkpoints.length
        ? `the run's only checkpoints are at its last step (${checkpoints.join(', ')}): nothing is left to train; train with a shorter checkpoint interval to export a point before the end`
        : 'the run has no checkpoint to export (train with a checkpoint interval, or resume it until it saves one)',
    );
  return latest;
}

/** The export's layout over the run's own (the merge `shardwise export` makes), or the field that cannot be. */
export function exportLayout(job: TrainJob, layout: ExportLayout = {}): ParallelSpec {
  if (layout.strategy !== undefined && !(STRATEGY_NAMES as readonly string[]).includes(layout.strategy))
    throw new ExportRequestError('layout.strategy', `strategy must be one of ${STRATEGY_NAMES.join(', ')}, got "${layout.strategy}"`);
  const own = job.parallel?.strategy ?? 'single';
  if (layout.strategy !== undefined && layout.strategy !== own && layout.world === undefined)
    throw new ExportRequestError('layout.world', `strategy ${layout.strategy} needs world (the ranks of the exported layout)`);
  const { grad_compression, ...rest } = layout;
  const par: ParallelSpec = {
    ...DEFAULT_PARALLEL,
    ...job.parallel,
    ...(rest as Partial<ParallelSpec>),
    ...(grad_compression ? { grad_compression } : {}),
  };
  const broken = TABLE[par.strategy as StrategyName].validate({ ...job, parallel: par });
  if (broken.length > 0) {
    const f = broken[0]!.field;
    throw new ExportRequestError(f in LAYOUT_FIELDS ? `layout.${f}` : f, broken[0]!.message);
  }
  return par;
}

/** layout fields runs.export takes, and the `shardwise export` flag each becomes */
const LAYOUT_FIELDS: Record<string, string> = {
  strategy: '--strategy',
  world: '--world',
  micro_batches: '--micro-batches',
  bucket_cap_mb: '--bucket-cap-mb',
  grad_compression: '--grad-compression',
};

/** The layout as `shardwise export --format torchrun` flags. */
export function exportFlags(layout: ExportLayout = {}): string[] {
  const out: string[] = [];
  for (const k of ['strategy', 'world', 'micro_batches', 'bucket_cap_mb'] as const)
    if (layout[k] !== undefined) out.push(LAYOUT_FIELDS[k]!, String(layout[k]));
  const g = layout.grad_compression;
  if (g) {
    out.push('--grad-compression', gradCompressionLabel(g));
    if (g.hook === 'powersgd' && g.start_powerSGD_iter !== undefined) out.push('--powersgd-start-iter', String(g.start_powerSGD_iter));
  }
  return out;
}

/**
 * `<runId>-pytorch-<n>`, the smallest n whose name is free (`taken`: as a job folder in exports/
 * or as a run), shortening the run id so the name stays a run id (at most 120 characters).
 */
export function exportName(runId: string, taken: (name: string) => boolean): string {
  for (let n = 1; ; n++) {
    const suffix = `-pytorch-${n}`;
    const name = `${runId.slice(0, 120 - suffix.length)}${suffix}`;
    if (!RUN_ID_RE.test(name)) throw new ExportRequestError('runId', `"${name}" is not a run folder name`);
    if (!taken(name)) return name;
  }
}

/** What to type to run the job: launch.sh cds to its own folder, so it runs from anywhere. */
export function exportCommand(dir: string): string {
  const q = /^[A-Za-z0-9_./-]+$/.test(dir) ? dir : `'${dir.replace(/'/g, `'\\''`)}'`;
  return `bash ${q}/launch.sh`;
}
