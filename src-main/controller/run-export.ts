// runs.export: a run's checkpoint written as a PyTorch job into the runs root's exports/ folder
// (never a path the client names), the job's run folder set to land beside the original
// (`<runs root>/<name>/`, name `<runId>-pytorch-<n>`), so the runs list shows it and Compare
// overlays it once `bash launch.sh` ran. Every check is made before anything is written, and a
// refused field comes back as a ValidationError naming it (as runs.resume's do).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ApiError, type ExportParams, type ExportResult, fieldError } from '../../common/api/index.js';
import type { TrainJob } from '../../workers/protocol/train.js';
import { RunFileError } from '../runs/folder-errors.js';
import type { RunFolder } from '../runs/run-folder.js';
import { EXPORTS_DIR, exportCheckpoint, exportCommand, exportFlags, exportLayout, exportName, ExportRequestError } from './export-job.js';
import { ExportWorkerError, runExportWorker } from './export-worker.js';
import type { RunStore } from './run-store.js';

const WHERE = 'runs.export params';

export class RunExports {
  /** names of exports being written now: two at once never pick the same */
  private readonly writing = new Set<string>();

  constructor(private readonly store: RunStore) {}

  async write(p: ExportParams): Promise<ExportResult> {
    if (!this.store.exists(p.runId))
      throw fieldError('ValidationError', WHERE, 'runId', `no run "${p.runId}" in ${this.store.root}; runs.list shows the runs`);
    const folder = this.store.open(p.runId);
    let step: number;
    try {
      step = exportCheckpoint(this.store.checkpoints(p.runId), this.store.state(p.runId, folder).steps, p.checkpoint);
      exportLayout(jobOf(folder), p.layout);
    } catch (e) {
      if (e instanceof ExportRequestError) throw fieldError('ValidationError', WHERE, e.field, e.message);
      throw e;
    }
    const root = this.store.root;
    if (this.store.exists(EXPORTS_DIR))
      throw new ApiError('Conflict', `a run named "${EXPORTS_DIR}" holds the place of the exports folder in ${root}; rename or delete it`);
    const name = exportName(
      p.runId,
      (n) => this.writing.has(n) || existsSync(path.join(root, EXPORTS_DIR, n)) || existsSync(path.join(root, n)),
    );
    const dir = path.join(root, EXPORTS_DIR, name);
    const source = path.join(folder.dir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);
    this.writing.add(name);
    try {
      // the job's run folder, relative to the job's: exports/<name>/../../<name> is the runs root's <name>
      const r = await runExportWorker(source, dir, ['--run-dir', path.join('..', '..', name), ...exportFlags(p.layout)]);
      return {
        dir,
        runId: name,
        command: exportCommand(dir),
        files: r.files,
        unmapped: r.unmapped,
        fromStep: r.step,
        steps: r.steps,
        world: r.world,
      };
    } catch (e) {
      // the controller's checks above are the worker's: a refusal here is one they missed, said as the worker says it
      if (e instanceof ExportWorkerError) throw new ApiError(e.badInput ? 'ValidationError' : 'ExportFailed', e.message);
      throw e;
    } finally {
      this.writing.delete(name);
    }
  }
}

/** the run's config.json as its job: a folder whose config is not one cannot be exported */
function jobOf(folder: RunFolder): TrainJob {
  try {
    return folder.readJob();
  } catch (e) {
    if (e instanceof RunFileError) throw new ApiError('InvalidRun', e.message);
    throw e;
  }
}
