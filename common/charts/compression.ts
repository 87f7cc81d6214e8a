// The run view's line for a run's gradient compression (common/grad-compression.ts): the hook,
// the compression ratio, bytes sent against float32, PowerSGD's error-feedback norm per rank and
// where its math ran.
import { formatBytes } from './style.js';

/** One rank's compression figures in the run summary (the done message's grad_compression). */
export interface GradCompressionFigures {
  hook: string;
  compression_ratio: number;
  uncompressed_bytes: number;
  compressed_bytes: number;
  error_feedback_norm?: number;
  /** PowerSGD: where its math ran */
  math?: 'device' | 'host';
}

/**
 * The run view's line for a finished run's compression (summary.grad_compression, per rank): the
 * hook, how much smaller the gradient payloads were, what each rank sent against float32 over the
 * run, and PowerSGD's error-feedback norm per rank (each rank keeps its own). Null without one.
 */
export function gradCompressionLine(summary: Record<string, unknown> | null | undefined): string | null {
  const per = summary?.grad_compression as Record<string, GradCompressionFigures | null> | undefined;
  if (!per || typeof per !== 'object') return null;
  const ranks = Object.entries(per).filter((e): e is [string, GradCompressionFigures] => e[1] !== null);
  if (ranks.length === 0) return null;
  const [, r0] = ranks[0]!;
  const sent = ranks.map(([r, g]) => `rank ${r} ${formatBytes(g.compressed_bytes)} for ${formatBytes(g.uncompressed_bytes)}`).join(' · ');
  const ef = ranks.filter(([, g]) => g.error_feedback_norm !== undefined);
  const norms = ef.length
    ? `; error-feedback norm: ${ef.map(([r, g]) => `rank ${r} ${g.error_feedback_norm!.toPrecision(3)}`).join(' · ')}`
    : '';
  const math = r0.math ? `; its math on the ${r0.math}` : '';
  return `Gradient compression: ${r0.hook}, ${r0.compression_ratio.toFixed(1)}× smaller gradient payloads (${sent})${norms}${math}`;
}
