// "Export as PyTorch job…", pure: whether a run offers it (completed or stopped, with a checkpoint
// that leaves steps to train), the dialog's fields (the run's own layout, or an Advisor row's),
// and runs.export's `layout` from them. tests/unit/export-job-dialog.test.ts checks them.
import type { LayoutPlan } from '../../common/advisor/types.js';
import type { ExportLayout } from '../../common/api/export-job.js';

/** The parts of a run's config.json the dialog reads. */
export interface ExportRunConfig {
  parallel?: { strategy?: string; world?: number; micro_batches?: number };
}

/** The checkpoints a job can continue from: those before the run's last step (newest first). */
export function exportableCheckpoints(checkpoints: number[], steps: number): number[] {
  return checkpoints.filter((s) => s < steps).sort((a, b) => b - a);
}

/** A completed or stopped run with a checkpoint before its last step offers the export. */
export function canExport(status: string | undefined, checkpoints: number[], steps: number): boolean {
  return (status === 'completed' || status === 'stopped') && exportableCheckpoints(checkpoints, steps).length > 0;
}

export interface ExportFields {
  strategy: string;
  world: number;
  micro_batches: number;
}

export function exportFieldsOf(config: ExportRunConfig): ExportFields {
  const p = config.parallel;
  return { strategy: p?.strategy ?? 'single', world: p?.world ?? 1, micro_batches: p?.micro_batches ?? 1 };
}

/** An Advisor row's layout as the dialog's fields (the export takes strategy, ranks and micro-batches). */
export function exportFieldsOfPlan(plan: LayoutPlan): ExportFields {
  return { strategy: plan.layout.strategy, world: plan.layout.world, micro_batches: plan.layout.micro_batches };
}

/** runs.export's `layout`: the fields as they are (the controller checks them against the run's batch). */
export function exportLayoutOf(f: ExportFields): ExportLayout {
  return { strategy: f.strategy, world: f.world, micro_batches: f.micro_batches };
}
