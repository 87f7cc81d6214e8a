// One sample of a machine's CPU load and RAM, the same on the controller's machine and on a
// paired agent's (its `host` request): systeminformation reads /proc/stat and /proc/meminfo on
// Linux and the platform's own calls elsewhere. The load is over the time since the previous
// call in this process, so the first call's reading (since boot) is not one to keep.
import si from 'systeminformation';
import { z } from 'zod';

export const HostSampleSchema = z.strictObject({
  /** CPU busy over all cores, 0..100 */
  cpu_pct: z.number().min(0).max(100),
  /** bytes in use (total - available) */
  mem_used: z.number().nonnegative(),
  mem_total: z.number().positive(),
});
export type HostSample = z.infer<typeof HostSampleSchema>;

export async function sampleHost(): Promise<HostSample> {
  const [load, mem] = await Promise.all([si.currentLoad(), si.mem()]);
  return { cpu_pct: Math.min(100, Math.max(0, load.currentLoad)), mem_used: mem.total - mem.available, mem_total: mem.total };
}
