// Live NVIDIA figures straight from nvidia-smi, for machines where systeminformation lists the
// GPU but not its utilisation, memory or temperature (seen on an H200 VM: every live field null).
// One query, CSV without units, a short timeout; absent nvidia-smi simply means no rows.
import { execFile } from 'node:child_process';

export interface NvidiaSmiGpu {
  index: number;
  name: string;
  /** e.g. 00000000:00:06.0 */
  busId: string;
  driver: string | null;
  memoryTotalMiB: number | null;
  memoryUsedMiB: number | null;
  utilizationPct: number | null;
  temperatureC: number | null;
  powerDrawW: number | null;
}

export const NVIDIA_SMI_QUERY = 'index,name,pci.bus_id,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw';

/** nvidia-smi prints "[N/A]" or "[Not Supported]" for what a GPU does not report. */
const num = (s: string | undefined): number | null => {
  const v = Number(s?.trim());
  return s !== undefined && s.trim() !== '' && Number.isFinite(v) ? v : null;
};

/** Rows of `nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(csv: string): NvidiaSmiGpu[] {
  const out: NvidiaSmiGpu[] = [];
  for (const line of csv.split('\n')) {
    const f = line.split(',').map((x) => x.trim());
    if (f.length < 9 || num(f[0]) === null) continue;
    out.push({
      index: num(f[0])!,
      name: f[1]!,
      busId: f[2]!,
      driver: f[3] && !f[3].startsWith('[') ? f[3] : null,
      memoryTotalMiB: num(f[4]),
      memoryUsedMiB: num(f[5]),
      utilizationPct: num(f[6]),
      temperatureC: num(f[7]),
      powerDrawW: num(f[8]),
    });
  }
  return out;
}

export function queryNvidiaSmi(timeoutMs = 5000): Promise<NvidiaSmiGpu[]> {
  return new Promise((resolve) => {
    execFile('nvidia-smi', [`--query-gpu=${NVIDIA_SMI_QUERY}`, '--format=csv,noheader,nounits'], { timeout: timeoutMs }, (err, stdout) => {
      resolve(err ? [] : parseNvidiaSmi(stdout));
    });
  });
}
