// Gradient compression as DDP communication hooks (PyTorch's ddp_comm_hooks: fp16_compress_hook,
// bf16_compress_hook, powerSGD_hook with PowerSGDState's names): the job's
// parallel.grad_compression, the config file's key of the same name, LaunchConfig's field, and
// `shardwise train --grad-compression none|fp16|bf16|powersgd[:R]`. The ranks' side is
// workers/comm-hooks/; zero1/zero2 take fp16/bf16 as a 16-bit gradient reduce-scatter
// (workers/comm-hooks/half-gradients.ts).
import { z } from 'zod';

export const GRAD_COMPRESSION_HOOKS = ['none', 'fp16', 'bf16', 'powersgd'] as const;
export type GradCompressionHook = (typeof GRAD_COMPRESSION_HOOKS)[number];

export const GradCompressionSchema = z
  .object({
    hook: z.enum(GRAD_COMPRESSION_HOOKS),
    /** PowerSGD: rank of the approximation (default 1) */
    matrix_approximation_rank: z.number().int().positive().max(1024).optional(),
    /** PowerSGD: steps all-reduced uncompressed before compression starts (default 10) */
    start_powerSGD_iter: z.number().int().nonnegative().optional(),
    /** PowerSGD: compress a matrix only if it shrinks at least this much (default 2) */
    min_compression_rate: z.number().positive().optional(),
    /** PowerSGD: error feedback (default on) */
    use_error_feedback: z.boolean().optional(),
    /** PowerSGD: start each step from the last step's Q (default on) */
    warm_start: z.boolean().optional(),
    /**
     * PowerSGD: where its math runs (Shardwise's own key): 'device', as PyTorch runs it, by default on
     * a hardware adapter; 'host' by default on a software adapter, whose device is the same CPU and
     * where the host's math skips the kernel launches and round trips (bench:powersgd times both
     * for one rank alone; bench:lan's ranks sharing the cores lose more to the device's)
     */
    math: z.enum(['device', 'host']).optional(),
  })
  .strict();
export type GradCompression = z.infer<typeof GradCompressionSchema>;

/** `none`, `fp16`, `bf16`, `powersgd` or `powersgd:R` -> the setting; null when the text is none of them. */
export function parseGradCompression(text: string): GradCompression | null {
  const m = /^(none|fp16|bf16|powersgd)(?::(\d+))?$/.exec(text);
  if (!m || (m[2] !== undefined && m[1] !== 'powersgd')) return null;
  const hook = m[1] as GradCompressionHook;
  if (m[2] === undefined) return { hook };
  const rank = Number(m[2]);
  return rank >= 1 && rank <= 1024 ? { hook, matrix_approximation_rank: rank } : null;
}

/** The setting as `--grad-compression` spells it: none, fp16, bf16 or powersgd:R (R = the rank, default 1). */
export function gradCompressionLabel(g: Pick<GradCompression, 'hook' | 'matrix_approximation_rank'> | undefined): string {
  if (!g || g.hook === 'none') return 'none';
  return g.hook === 'powersgd' ? `powersgd:${g.matrix_approximation_rank ?? 1}` : g.hook;
}
