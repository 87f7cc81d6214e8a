// This machine's devices as `devices.list` returns them: the `shardwise devices --json`
// object (WebGPU adapters probed in a child process, joined with systeminformation's GPUs).
import { z } from 'zod';

export const AdapterViewSchema = z.looseObject({
  index: z.number(),
  vendor: z.string(),
  architecture: z.string(),
  device: z.string(),
  description: z.string(),
  backend: z.string(),
  /** a software adapter (SwiftShader: runs on the CPU) */
  isSoftware: z.boolean(),
  source: z.string(),
  limits: z.record(z.string(), z.number()),
  features: z.array(z.string()),
  /** index into system.controllers, or null */
  systemGpu: z.number().nullable(),
});

export const SystemGpuViewSchema = z.looseObject({
  index: z.number(),
  vendor: z.string(),
  model: z.string(),
  vramMiB: z.number().nullable(),
  driver: z.string().nullable(),
  utilizationPct: z.number().nullable(),
  memoryUsedMiB: z.number().nullable(),
  memoryTotalMiB: z.number().nullable(),
  temperatureC: z.number().nullable(),
});

export const DevicesViewSchema = z.object({
  adapters: z.array(AdapterViewSchema),
  tried: z.array(z.string()),
  probe: z.object({ ok: z.boolean(), ms: z.number(), error: z.string().optional() }),
  system: z.looseObject({ controllers: z.array(SystemGpuViewSchema), error: z.string().optional() }),
  /** when this report was taken (ISO time) */
  probed_at: z.string(),
});
export type DevicesView = z.infer<typeof DevicesViewSchema>;

/**
 * devices.live: the system GPUs of the last probe with their live fields (utilisation, memory
 * used, temperature, power) read again now where nvidia-smi reports them, without probing the
 * WebGPU adapters again. Cached for about 2 s, so any number of dashboards may poll it.
 */
export const LiveDevicesViewSchema = z.object({
  controllers: z.array(SystemGpuViewSchema),
  /** nvidia-smi: live fields read at taken_at; probe: no live source here, the values of the last probe (probed_at) */
  source: z.enum(['nvidia-smi', 'probe']),
  taken_at: z.string(),
  probed_at: z.string(),
});
export type LiveDevicesView = z.infer<typeof LiveDevicesViewSchema>;
