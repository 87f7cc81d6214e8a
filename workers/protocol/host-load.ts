// One sample of a machine's CPU load and RAM, the same on the controller's machine and on a
// paired agent's (its `host` request). RAM comes from systeminformation's mem() (an async read
// of /proc/meminfo on Linux, the platform's own calls elsewhere). The CPU load is computed from
// Node's os.cpus() tick counters, busy over total since the previous call in this process:
// systeminformation's currentLoad() does the same from the same counters, but on Linux it
// first runs `cat /proc/stat` through execSync, which blocked the controller's event loop for
// up to 140 ms a sample on a loaded machine. The first call's reading covers the time since
// boot, so it is not one to keep.
import os from 'node:os';
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

let previous: { busy: number; total: number } | null = null;

/** busy / total CPU ticks of all cores since the previous call (since boot on the first), in % */
export function cpuLoadSinceLast(cpus: readonly { times: os.CpuInfo['times'] }[] = os.cpus()): number {
  let busy = 0;
  let total = 0;
  for (const { times: t } of cpus) {
    const all = t.user + t.nice + t.sys + t.idle + t.irq;
    total += all;
    busy += all - t.idle;
  }
  const d = previous ? { busy: busy - previous.busy, total: total - previous.total } : { busy, total };
  previous = { busy, total };
  return d.total > 0 ? Math.min(100, Math.max(0, (100 * d.busy) / d.total)) : 0;
}

export async function sampleHost(): Promise<HostSample> {
  const mem = await si.mem();
  return { cpu_pct: cpuLoadSinceLast(), mem_used: mem.total - mem.available, mem_total: mem.total };
}
