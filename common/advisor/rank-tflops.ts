// Achieved TFLOP/s and MFU per rank. Each rank reports the FLOPs of its step (common/advisor/
// flops.ts: model FLOPs, and hardware FLOPs that count activation checkpointing's recomputation);
// the throughput is over the step's time, the slowest rank's (every rank waits for it, so that is
// what the step cost). MFU divides the model FLOPs' throughput by the peak of the rank's adapter
// where it is known: its device class (device-classes.ts) or this machine's stored profile.
// Pure: the run driver computes them, the API carries them (step rows, summary), the run view
// and the report print them with formatTflops.
import { z } from 'zod';
import { deviceClassForName } from './device-classes.js';
import { mfu, tflopsOf } from './flops.js';
import type { MachineProfile } from './profile.js';

export const RankTflopsSchema = z.object({
  /** model FLOPs (no recomputation) per second, in TFLOP/s */
  model: z.number(),
  /** FLOPs as the rank computed them (with recomputation) per second, in TFLOP/s */
  hardware: z.number(),
  /** model TFLOP/s over the adapter's peak (0..1), where the peak is known */
  mfu: z.number().optional(),
});
export type RankTflops = z.infer<typeof RankTflopsSchema>;

/** fp32 peak TFLOP/s of an adapter by name: its device class, else the profile's figure for an adapter of that name */
export function adapterPeakTflops(name: string, profile: MachineProfile | null): number | undefined {
  const cls = deviceClassForName(name);
  if (cls) return cls.fp32_tflops;
  return profile?.adapters.find((a) => a.name === name && a.peak_tflops !== undefined)?.peak_tflops;
}

/** one step's figures per rank, from each rank's FLOPs and the step's time */
export function stepTflops(
  flops: ReadonlyMap<number, { model: number; hardware: number }>,
  stepMs: number,
  peaks: ReadonlyMap<number, number>,
): Record<string, RankTflops> {
  const out: Record<string, RankTflops> = {};
  for (const [rank, f] of [...flops].sort((a, b) => a[0] - b[0])) {
    const model = tflopsOf(f.model, stepMs);
    const peak = peaks.get(rank);
    out[String(rank)] = { model, hardware: tflopsOf(f.hardware, stepMs), ...(peak ? { mfu: mfu(model, peak) } : {}) };
  }
  return out;
}

/** the run's figures per rank: the mean over the steps after the first (which compiles the kernels), or the only step */
export function meanTflops(steps: readonly Record<string, RankTflops>[]): Record<string, RankTflops> | undefined {
  const use = steps.length > 1 ? steps.slice(1) : steps;
  if (use.length === 0) return undefined;
  const out: Record<string, RankTflops> = {};
  for (const rank of Object.keys(use[0]!)) {
    const rows = use.map((s) => s[rank]).filter((x): x is RankTflops => x !== undefined);
    const avg = (f: (x: RankTflops) => number) => rows.reduce((a, x) => a + f(x), 0) / rows.length;
    const withMfu = rows.every((x) => x.mfu !== undefined);
    out[rank] = { model: avg((x) => x.model), hardware: avg((x) => x.hardware), ...(withMfu ? { mfu: avg((x) => x.mfu!) } : {}) };
  }
  return out;
}

const figure = (x: number) => (x >= 100 ? x.toFixed(0) : x.toPrecision(3));

const RATE_UNITS = [
  ['PFLOP/s', 1e3],
  ['TFLOP/s', 1],
  ['GFLOP/s', 1e-3],
  ['MFLOP/s', 1e-6],
  ['kFLOP/s', 1e-9],
] as const;

/** The unit a rate of `tflops` TFLOP/s reads best in: the largest where it is at least 1 (0.000848 TFLOP/s is 848 MFLOP/s). */
export function flopRateUnit(tflops: number): { unit: string; scale: number } {
  const [unit, scale] = RATE_UNITS.find(([, s]) => Math.abs(tflops) >= s) ?? RATE_UNITS[RATE_UNITS.length - 1]!;
  return { unit, scale };
}

/** "848 MFLOP/s", "33.5 TFLOP/s" */
export function formatFlopRate(tflops: number): string {
  const { unit, scale } = flopRateUnit(tflops);
  return `${figure(tflops / scale)} ${unit}`;
}

/** "rank 0: 12.3 GFLOP/s (16.4 with recomputation), MFU 1.2%; rank 1: ..." (each rank in the unit its model figure fits) */
export function formatTflops(t: Record<string, RankTflops>): string {
  return Object.entries(t)
    .map(([rank, x]) => {
      const { unit, scale } = flopRateUnit(x.model);
      const hw = Math.abs(x.hardware - x.model) > 1e-12 * x.model ? ` (${figure(x.hardware / scale)} with recomputation)` : '';
      const m = x.mfu !== undefined ? `, MFU ${(100 * x.mfu).toFixed(1)}%` : '';
      return `rank ${rank}: ${figure(x.model / scale)} ${unit}${hw}${m}`;
    })
    .join('; ');
}
