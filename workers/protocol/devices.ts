// What a device probe (workers/cli/probe-devices.ts) prints on stdout and the controller
// reads back: this machine's WebGPU adapters and the drivers it tried. The controller runs
// the probe in a child process so that a driver crash or hang cannot take it down, and
// checks the answer against this schema on receipt.
import { z } from 'zod';

export const AdapterReportSchema = z.object({
  index: z.number().int().nonnegative(),
  vendor: z.string(),
  architecture: z.string(),
  device: z.string(),
  description: z.string(),
  backend: z.string(),
  isSoftware: z.boolean(),
  /** where the driver came from: 'system', 'VK_ICD_FILENAMES=...' or 'swiftshader:<icd.json>' */
  source: z.string(),
  limits: z.record(z.string(), z.number()),
  features: z.array(z.string()),
});
export type AdapterReport = z.infer<typeof AdapterReportSchema>;

export const DeviceProbeResultSchema = z.object({
  adapters: z.array(AdapterReportSchema),
  /** every driver source the probe tried, in order, with why it was skipped where it was */
  tried: z.array(z.string()),
});
export type DeviceProbeResult = z.infer<typeof DeviceProbeResultSchema>;

/** Path of the compiled probe relative to dist/, for whoever spawns it. */
export const PROBE_DEVICES_SCRIPT = 'workers/cli/probe-devices.js';
