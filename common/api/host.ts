// Host CPU and RAM of the machines a run uses, sampled over time (W&B's and the Ray dashboard's
// system charts), beside device memory: a data loader or an offloaded optimizer that saturates
// the CPU, or host RAM running out under ZeRO-Offload, shows here and not on the device.
// Kept in the run folder's host.jsonl, one row per machine per sample.
import { z } from 'zod';

export const HostRowSchema = z.object({
  /** epoch ms of the sample */
  time: z.number(),
  /** the machine's host name */
  machine: z.string(),
  /** CPU busy over all cores since the previous sample, 0..100 */
  cpu_pct: z.number(),
  /** bytes in use (total - available: what `free` and htop call used) */
  mem_used: z.number(),
  mem_total: z.number(),
});
export type HostRow = z.infer<typeof HostRowSchema>;
