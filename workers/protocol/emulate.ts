// Emulated devices (benchmarks only, never a default): the job field `emulate` and its
// SHARDWISE_EMULATE spelling. With it, each rank's step time follows a stated device (per-layer
// forward and backward times from a TFLOP/s figure or from a profile measured on a real GPU)
// instead of the software adapter the ranks share, so N ranks on 2 cores behave like N GPUs.
// The real kernels still run and produce the real numbers; how the pacing works and its limits
// are in workers/gpu/emulated-device.ts.
//
// Usage (benchmarks, e.g. bench/lan.ts):
//   SHARDWISE_EMULATE='tflops=4.3' shardwise train ...            every layer pass at 4.3 TFLOP/s
//   SHARDWISE_EMULATE='tflops=4.3,shape=gpt2-medium' ...          timing and gradient bytes of GPT-2 medium
//   SHARDWISE_EMULATE='profile=/path/layers.json' ...             per-layer times measured on a GPU
//   SHARDWISE_EMULATE='{"tflops":4.3,"overhead_ms":0.5}' ...      the job field as JSON
// or in a job / config file: `emulate: { tflops: 4.3 }`. The controller (resolveJob) reads the
// variable, so it works for `shardwise train`, `shardwise serve` and runs placed on agents.
// Every output of such a run carries `emulated` (the summary, `train --json`, the dashboard badge).
import { z } from 'zod';
import type { GptConfig } from '../../common/model-layout.js';

/**
 * A model shape the emulated device times (and whose gradient bytes DDP sends) while a small proxy
 * of the same depth computes: GptConfig's sizes but the positions (block_size), which stay the proxy's.
 */
export type EmulatedShape = Omit<GptConfig, 'block_size'> & {
  /** how outputs name it, e.g. "GPT-2 medium" */
  name: string;
};

// `satisfies`: the schema must parse to an EmulatedShape, so a GptConfig field renamed or added fails to compile here
export const EmulatedShapeSchema = z
  .object({
    name: z.string().min(1),
    n_layer: z.number().int().positive(),
    n_head: z.number().int().positive(),
    d_model: z.number().int().positive(),
    vocab_size: z.number().int().positive(),
  })
  .strict() satisfies z.ZodType<EmulatedShape>;

/** Shapes SHARDWISE_EMULATE's `shape=` can name. */
export const EMULATED_SHAPES: Record<string, EmulatedShape> = {
  'gpt2-medium': { name: 'GPT-2 medium', n_layer: 24, n_head: 16, d_model: 1024, vocab_size: 50257 },
  gpt2: { name: 'GPT-2 124M', n_layer: 12, n_head: 12, d_model: 768, vocab_size: 50257 },
};

/**
 * A profile of one real device: each layer kind's forward and backward time for `tokens`
 * tokens (B*T of one micro-batch) at the profiled shape; the emulation scales them linearly
 * with the micro-batch's tokens.
 */
export const DeviceProfileSchema = z
  .object({
    device: z.string().min(1),
    tokens: z.number().int().positive(),
    layers: z
      .object({
        embedding: z.object({ forward_ms: z.number().nonnegative(), backward_ms: z.number().nonnegative() }).strict(),
        block: z.object({ forward_ms: z.number().nonnegative(), backward_ms: z.number().nonnegative() }).strict(),
        head: z.object({ forward_ms: z.number().nonnegative(), backward_ms: z.number().nonnegative() }).strict(),
      })
      .strict(),
    /** the optimizer step over the profiled model (0: not emulated) */
    optimizer_ms: z.number().nonnegative().optional(),
  })
  .strict();
export type DeviceProfile = z.infer<typeof DeviceProfileSchema>;

export const EmulateSpecSchema = z
  .object({
    /** sustained TFLOP/s of the emulated device: a layer pass lasts its FLOPs / this (H200 with this engine's kernels: ~4.3) */
    tflops: z.number().positive().optional(),
    /** a DeviceProfile JSON file (per-layer times measured on a real GPU), read by each rank */
    profile: z.string().min(1).optional(),
    /** fixed launch cost added to every layer pass, in ms (kernel launches and submits; default 0) */
    overhead_ms: z.number().nonnegative().optional(),
    /** the optimizer step's device time in ms (default: the profile's, else 0: the real step's time) */
    optimizer_ms: z.number().nonnegative().optional(),
    /** time (and, for DDP, pad the gradient buckets to) this shape instead of the job's model, which must have its depth */
    shape: EmulatedShapeSchema.optional(),
  })
  .strict()
  .refine((s) => (s.tflops === undefined) !== (s.profile === undefined), {
    message: 'emulate needs exactly one of tflops (a stated TFLOP/s) or profile (a file of per-layer times)',
  });
export type EmulateSpec = z.infer<typeof EmulateSpecSchema>;

/** What a rank reports of its emulation in the done message (the summary's `emulated`). */
export const EmulatedReportSchema = z.object({
  /** "4.3 TFLOP/s" or the profile's device */
  device: z.string(),
  shape: z.string().optional(),
  /** emulated device time of one step's compute (forward, backward, optimizer), ms, mean over steps */
  device_ms_per_step: z.number(),
  /** share of the readbacks where the real kernels finished after the emulated device: then the shared CPU, not the emulated device, set the time */
  real_bound_pct: z.number(),
  /** DDP: gradient bytes sent per real gradient byte (the emulated shape's bucket padding); 1 without a shape */
  grad_bytes_scale: z.number().optional(),
});
export type EmulatedReport = z.infer<typeof EmulatedReportSchema>;

/**
 * SHARDWISE_EMULATE's value -> the job field: JSON, or `key=value` pairs separated by commas
 * (tflops, profile, overhead_ms, optimizer_ms, shape: a name of EMULATED_SHAPES). Unset or empty: none.
 */
export function parseEmulateEnv(raw: string | undefined): EmulateSpec | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const text = raw.trim();
  let obj: Record<string, unknown>;
  if (text.startsWith('{')) {
    try {
      obj = JSON.parse(text) as Record<string, unknown>;
    } catch (e) {
      throw new Error(`SHARDWISE_EMULATE is not valid JSON (${(e as Error).message}); write e.g. {"tflops":4.3} or tflops=4.3`, {
        cause: e,
      });
    }
  } else {
    obj = {};
    for (const part of text.split(',')) {
      const [k, v, ...rest] = part.split('=').map((s) => s.trim());
      if (!k || v === undefined || rest.length)
        throw new Error(`SHARDWISE_EMULATE: "${part}" is not key=value; write e.g. tflops=4.3,shape=gpt2-medium`);
      obj[k] = k === 'profile' || k === 'shape' ? v : Number(v);
    }
  }
  if (typeof obj.shape === 'string') {
    const shape = EMULATED_SHAPES[obj.shape];
    if (!shape)
      throw new Error(`SHARDWISE_EMULATE: unknown shape "${obj.shape}"; choose one of ${Object.keys(EMULATED_SHAPES).join(', ')}`);
    obj.shape = shape;
  }
  const r = EmulateSpecSchema.safeParse(obj);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new Error(`SHARDWISE_EMULATE: ${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
  }
  return r.data;
}
