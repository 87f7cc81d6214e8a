// The machine profile: what `shardwise profile` measured on one machine, and what the advisor's
// cost model (plan, runs.advise) reads its device throughput, copy rates and link speeds from.
// Stored per machine in the controller's data dir and reused until `profile --refresh`.
//
// Shape:
//   machine   which machine and when
//   adapters  per WebGPU adapter: its memory and peak (from device-classes.ts when the device is
//             a known class), each kernel a training step uses timed at the sizes asked
//             (op, shape in the B, T, C, V, NH letters, flops and bytes of one launch, ms; the
//             matmuls and attention also at bf16 and fp16, marked `precision`), and
//             the host <-> device copy rates, and `shared`: the aggregate throughput of k
//             processes running the same work on it at once over one process's: a rank's whole
//             step at the micro-batches layouts run, and single kernels per size
//             (workers/cli/profile-sharing.ts; what ranks sharing the adapter get, time.ts)
//   links     between local ranks (shared memory, TCP through the real comm layer) and to each
//             paired agent (over its authenticated channel): bandwidth and one-message latency;
//             link_errors lists the agents that could not be measured
import { z } from 'zod';

export const KernelTimingSchema = z.object({
  /** 'matmul', 'attention', 'layernorm', 'gelu', 'crossentropy', 'adamw', 'encoder', ... */
  op: z.string().min(1),
  /** the launch's shape in the model's letters, e.g. "B=8 T=64 C=64 -> 3C" */
  shape: z.string(),
  /** floating-point operations of one launch (0 for pure data movement) */
  flops: z.number().nonnegative(),
  /** bytes one launch reads and writes */
  bytes: z.number().nonnegative(),
  /** median time of one launch, milliseconds */
  ms: z.number().positive(),
  /** the storage of the op's compute tensors (mixed precision's 16-bit matmuls and attention); absent = fp32 */
  precision: z.enum(['fp32', 'bf16', 'fp16']).optional(),
});
export type KernelTiming = z.infer<typeof KernelTimingSchema>;

/** the op of a sharing figure measured on a rank's whole training step, not one kernel */
export const STEP_SHARE_OP = 'step';

/**
 * k processes running the same work on an adapter at once: their rounds per second together over
 * one process's alone. The work is one kernel launched back to back (op: the kernel's), or one
 * rank's whole training step at a micro-batch (op 'step': its launches, readbacks and update;
 * workers/cli/profile-step.ts).
 */
export const SharedTimingSchema = z.object({
  /** processes on the adapter at once */
  k: z.number().int().min(2),
  /** the kernel, as in KernelTiming, or 'step' */
  op: z.string().min(1),
  shape: z.string(),
  /** a kernel's FLOPs per launch; a step's mean FLOPs per matmul or attention launch (the size the time model interpolates by) */
  flops: z.number().nonnegative(),
  bytes: z.number().nonnegative(),
  /** aggregate throughput of the k over one alone: 1 a time-slicing GPU, above 1 where one process leaves the adapter idle, below 1 where they contend */
  speedup: z.number().positive(),
  /** a step's micro-batch (sequences) */
  batch: z.number().int().positive().optional(),
  /** a step's launches */
  launches: z.number().int().positive().optional(),
  /** a step alone, ms */
  alone_ms: z.number().positive().optional(),
  /** one process's step while all k run theirs, ms */
  shared_ms: z.number().positive().optional(),
  /** the whole batch the micro-batch is part of (sequences) */
  whole_batch: z.number().int().positive().optional(),
  /** one process's step at the whole batch, alone, ms: what k ranks splitting the batch are compared with */
  whole_batch_ms: z.number().positive().optional(),
});
export type SharedTiming = z.infer<typeof SharedTimingSchema>;

export const AdapterProfileSchema = z.object({
  /** the adapter's index as `shardwise devices` lists it */
  index: z.number().int().nonnegative(),
  name: z.string(),
  /** 'vulkan', 'metal', 'd3d12', ... */
  backend: z.string(),
  /** a software adapter (SwiftShader: runs on the CPU, shares the cores with everything else) */
  is_software: z.boolean().optional(),
  /** device memory; from the system GPU or the device class, absent when unknown */
  memory_bytes: z.number().positive().optional(),
  /** peak dense TFLOP/s at fp32, from device-classes.ts when the device is a known class */
  peak_tflops: z.number().positive().optional(),
  /** peak dense TFLOP/s at fp16/bf16 (tensor cores, fp32 accumulate), when known */
  peak_tflops_half: z.number().positive().optional(),
  /** the device class the name matched (device-classes.ts), if any */
  device_class: z.string().optional(),
  kernels: z.array(KernelTimingSchema),
  /** k processes sharing the adapter against one, per kernel size (absent in profiles taken before it was measured: ranks that share it then split its throughput) */
  shared: z.array(SharedTimingSchema).optional(),
  /** the fixed cost of one kernel launch among many recorded in a pass, ms (absent in profiles taken before it was measured) */
  launch_ms: z.number().nonnegative().optional(),
  /** one host round trip: submit, wait for the device, map a few bytes back, ms (what a collective the rank waits on pays before its bytes move) */
  sync_ms: z.number().nonnegative().optional(),
  /** host -> device copy rate, GB/s (1e9 bytes per second) */
  h2d_gbps: z.number().positive(),
  /** device -> host copy rate, GB/s */
  d2h_gbps: z.number().positive(),
});
export type AdapterProfile = z.infer<typeof AdapterProfileSchema>;

export const LINK_KINDS = ['shm', 'tcp', 'agent'] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

export const LinkProfileSchema = z.object({
  /** shm: ranks on this machine through /dev/shm; tcp: ranks on this machine over loopback TCP; agent: to a paired agent */
  kind: z.enum(LINK_KINDS),
  /** for kind 'agent': the agent's HOST:PORT, as a placement names it */
  peer: z.string().optional(),
  /** bandwidth of a large message, GB/s (1e9 bytes per second) */
  gbps: z.number().positive(),
  /** one small message one way, microseconds */
  latency_us: z.number().nonnegative(),
});
export type LinkProfile = z.infer<typeof LinkProfileSchema>;

/** a link that could not be measured (an unreachable agent): reported, the rest of the profile is kept */
export const LinkErrorSchema = z.object({
  kind: z.enum(LINK_KINDS),
  peer: z.string().optional(),
  /** what went wrong, for the user */
  error: z.string(),
});
export type LinkError = z.infer<typeof LinkErrorSchema>;

export const MachineProfileSchema = z.object({
  machine: z.object({
    hostname: z.string(),
    /** stable id of this machine (the controller's machine id) */
    id: z.string(),
    /** when the profile was taken, ISO time */
    measured_at: z.string(),
  }),
  adapters: z.array(AdapterProfileSchema),
  links: z.array(LinkProfileSchema),
  /** links that could not be measured this time, and why */
  link_errors: z.array(LinkErrorSchema).optional(),
  /** the model sizes the kernels were timed at, e.g. ["tiny", "small"] or a model's letters */
  sizes: z.array(z.string()).optional(),
  /** how long the calibration took, milliseconds */
  duration_ms: z.number().nonnegative().optional(),
  /** measured on an emulated cluster (scaled devices and links), not on the hardware itself */
  emulated: z.boolean().optional(),
});
export type MachineProfile = z.infer<typeof MachineProfileSchema>;

/** the kernels of one op on one adapter (an op is timed at several shapes) */
export function kernelsOf(adapter: AdapterProfile, op: string): KernelTiming[] {
  return adapter.kernels.filter((k) => k.op === op);
}

/** achieved GFLOP/s of a timed launch (0 for a copy) */
export function kernelGflops(k: KernelTiming): number {
  return k.flops / (k.ms * 1e6);
}
