// runs.export: a run's checkpoint as a PyTorch job (`shardwise export --format torchrun`, the
// dashboard's "Export as PyTorch job…"), written by the controller into a folder it chooses in
// the runs root, never one the client names: `exports/<runId>-pytorch-<n>/`. The job writes its
// run folder beside the original, `<runId>-pytorch-<n>/`, so that the runs list shows it and
// Compare overlays it once `bash launch.sh` ran (docs/export-pytorch.md).
import { z } from 'zod';
import { GradCompressionSchema } from '../grad-compression.js';
import { LaunchConfigSchema, RunIdSchema } from './launch-config.js';

/** The layout flags of `shardwise export --format torchrun` (absent: the run's own), with LaunchConfig's names. */
export const ExportLayoutSchema = LaunchConfigSchema.pick({
  strategy: true,
  world: true,
  micro_batches: true,
  bucket_cap_mb: true,
}).extend({
  /** the DDP communication hook: --grad-compression and --powersgd-start-iter */
  grad_compression: GradCompressionSchema.pick({ hook: true, matrix_approximation_rank: true, start_powerSGD_iter: true })
    .strict()
    .optional(),
});
export type ExportLayout = z.infer<typeof ExportLayoutSchema>;

export const EXPORT_FORMATS = ['torchrun'] as const;

export const ExportParamsSchema = z.strictObject({
  runId: RunIdSchema,
  format: z.enum(EXPORT_FORMATS),
  /** the step of one of the run's checkpoints (default: its latest before the last step, so that steps are left to train) */
  checkpoint: z.number().int().nonnegative().optional(),
  layout: ExportLayoutSchema.optional(),
});
export type ExportParams = z.infer<typeof ExportParamsSchema>;

export const ExportResultSchema = z.object({
  /** the job's folder (exports/<name>/ in the runs root) */
  dir: z.string(),
  /** the run id the job's run folder has in the runs list once it runs */
  runId: z.string(),
  /** what to type to run it (launch.sh finds a Python with torch; NNODES etc. for several machines) */
  command: z.string(),
  /** the job's files, relative to dir */
  files: z.array(z.string()),
  /** the README's "What does not map" lines */
  unmapped: z.array(z.string()),
  /** the job continues from this checkpoint's step and trains to `steps` */
  fromStep: z.number(),
  steps: z.number(),
  /** processes the job starts */
  world: z.number(),
});
export type ExportResult = z.infer<typeof ExportResultSchema>;
