// The launch form's pure parts: which knobs a strategy has, the world its knobs make, each
// rank's role in the grid (all three from the strategy table, common/strategies.ts), the
// gradient compression and the per-rank placement as the API's LaunchConfig spells them.
// No DOM, no API: tests/unit/launch-form.test.ts checks them.
import type { LaunchConfig } from '../../common/api/index.js';
import { type Knob, strategyOf } from '../../common/strategies.js';

export interface ParallelKnobs {
  strategy: string;
  /** ranks of the data-parallel strategies (dp, ddp, zero1-3) */
  world: number;
  /** tensor-parallel ranks (tp, 3d) */
  tp: number;
  /** pipeline stages (pp, 3d) */
  pp: number;
  /** data-parallel replicas (3d) */
  dp: number;
  schedule: 'gpipe' | '1f1b';
}

/** Which knobs apply to a strategy (the form shows only those; the strategy table decides). */
export function knobsOf(strategy: string): { world: boolean; tp: boolean; pp: boolean; dp: boolean; schedule: boolean } {
  const k = strategyOf(strategy)?.knobs;
  const has = (knob: Knob) => k?.has(knob) ?? false;
  return { world: has('world'), tp: has('tp'), pp: has('pp'), dp: has('dp'), schedule: has('schedule') };
}

/** Ranks the knobs make: the table's world-size rule (tp's group and pp's stages are the world; 3d's is D x T x P). */
export function worldOf(k: ParallelKnobs): number {
  return strategyOf(k.strategy)?.worldOf(k) ?? k.world;
}

/** The parallel fields of a LaunchConfig: only those that apply to the strategy. */
export function parallelConfig(k: ParallelKnobs): Pick<LaunchConfig, 'strategy' | 'world' | 'tp' | 'pp' | 'dp' | 'schedule'> {
  const on = knobsOf(k.strategy);
  const c: Pick<LaunchConfig, 'strategy' | 'world' | 'tp' | 'pp' | 'dp' | 'schedule'> = { strategy: k.strategy, world: worldOf(k) };
  if (on.tp) c.tp = k.tp;
  if (on.pp) c.pp = k.pp;
  if (on.dp) c.dp = k.dp;
  if (on.schedule) c.schedule = k.schedule;
  return c;
}

/** The form's gradient-compression choice: a hook, and PowerSGD's rank and start iteration ('' = the default, 10). */
export interface CompressionKnobs {
  compression: 'none' | 'fp16' | 'bf16' | 'powersgd';
  powersgd_rank: number;
  powersgd_start: number | '';
}

/**
 * The LaunchConfig's grad_compression: absent for none and for a strategy without the knob (the
 * table says which take it). Whether a hook fits the strategy (PowerSGD does not fit ZeRO) is the
 * resolver's to say: its refusal names the field and the form highlights it.
 */
export function compressionConfig(strategy: string, k: CompressionKnobs): LaunchConfig['grad_compression'] {
  if (k.compression === 'none' || !strategyOf(strategy)?.knobs.has('grad_compression')) return undefined;
  if (k.compression !== 'powersgd') return { hook: k.compression };
  return {
    hook: 'powersgd',
    matrix_approximation_rank: k.powersgd_rank,
    ...(k.powersgd_start !== '' ? { start_powerSGD_iter: k.powersgd_start } : {}),
  };
}

/** What a rank does in the grid, for the placement table (Megatron's order: tp, then dp, then pp). */
export function rankRole(k: ParallelKnobs, rank: number): string {
  const s = strategyOf(k.strategy);
  if (!s) return `rank ${rank}`;
  const on = knobsOf(k.strategy);
  return s.role(
    s.grid({ world: worldOf(k), ...(on.tp ? { tp: k.tp } : {}), ...(on.pp ? { pp: k.pp } : {}), ...(on.dp ? { dp: k.dp } : {}) }),
    rank,
  );
}

/** One placement row of the form: "local" or a paired agent's HOST:PORT, and an adapter ('' = the default). */
export interface PlacementRow {
  machine: string;
  device: string;
}

export const LOCAL = 'local';

/** Rows for `world` ranks, keeping the choices already made; new ranks go on this machine's default device. */
export function resizePlacement(rows: readonly PlacementRow[], world: number): PlacementRow[] {
  return Array.from({ length: Math.max(0, world) }, (_, r) => rows[r] ?? { machine: LOCAL, device: '' });
}

/**
 * The LaunchConfig's placement: omitted while every rank is local on the default device (the
 * API's default layout), else one entry per rank (a default device stays unset).
 */
export function placementConfig(rows: readonly PlacementRow[]): LaunchConfig['placement'] {
  if (rows.every((r) => r.machine === LOCAL && r.device === '')) return undefined;
  return rows.map((r) => (r.device === '' ? { machine: r.machine } : { machine: r.machine, device: r.device }));
}
