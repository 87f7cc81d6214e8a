// The 3D rank grid (Megatron's RankGenerator, order tp-dp-pp): one world of D x T x P ranks,
// tensor-parallel ranks adjacent, then data-parallel, then pipeline stages:
//   rank = pp * (D*T) + dp * T + tp
// so a TP group is T consecutive ranks (the chattiest collectives stay closest), a DP group the
// ranks with the same (pp, tp), a PP group the ranks with the same (dp, tp). Pure: no network.
// It lives in protocol/ because the layout is part of the launch contract: the controller
// validates and names ranks by it, the ranks build their groups from it.
import type { TrainJob } from './train.js';

export interface Grid {
  /** data-parallel replicas */
  dp: number;
  /** tensor-parallel shards */
  tp: number;
  /** pipeline stages */
  pp: number;
}

export interface Coords {
  dp: number;
  tp: number;
  pp: number;
}

export function worldSize(g: Grid): number {
  return g.dp * g.tp * g.pp;
}

export function rankOf(g: Grid, c: Coords): number {
  return c.pp * (g.dp * g.tp) + c.dp * g.tp + c.tp;
}

export function coordsOf(g: Grid, rank: number): Coords {
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize(g))
    throw new Error(`rank ${rank} is outside the ${g.dp}x${g.tp}x${g.pp} grid`);
  return { tp: rank % g.tp, dp: Math.floor(rank / g.tp) % g.dp, pp: Math.floor(rank / (g.dp * g.tp)) };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Every TP group (T consecutive ranks), ordered by (pp, dp). */
export function tpGroups(g: Grid): number[][] {
  return range(g.pp).flatMap((pp) => range(g.dp).map((dp) => range(g.tp).map((tp) => rankOf(g, { pp, dp, tp }))));
}

/** Every DP group (same pp and tp), ordered by (pp, tp). */
export function dpGroups(g: Grid): number[][] {
  return range(g.pp).flatMap((pp) => range(g.tp).map((tp) => range(g.dp).map((dp) => rankOf(g, { pp, dp, tp }))));
}

/** Every PP group (same dp and tp; stage = index), ordered by (dp, tp). */
export function ppGroups(g: Grid): number[][] {
  return range(g.dp).flatMap((dp) => range(g.tp).map((tp) => range(g.pp).map((pp) => rankOf(g, { pp, dp, tp }))));
}

/** The tied-embedding groups: first and last stage of each PP group (none with one stage). */
export function embeddingGroups(g: Grid): number[][] {
  return g.pp < 2 ? [] : ppGroups(g).map((r) => [r[0]!, r[r.length - 1]!]);
}

/** The three groups one rank belongs to. */
export function groupsOf(g: Grid, rank: number): { tp: number[]; dp: number[]; pp: number[] } {
  const find = (all: number[][]) => all.find((x) => x.includes(rank))!;
  coordsOf(g, rank);
  return { tp: find(tpGroups(g)), dp: find(dpGroups(g)), pp: find(ppGroups(g)) };
}

/** D x T x P must be the ranks given; each message names the fields. */
export function validateGrid(g: Grid, world: number): void {
  for (const k of ['dp', 'tp', 'pp'] as const) {
    if (!Number.isInteger(g[k]) || g[k] < 1) throw new Error(`parallel.${k} must be a positive integer, got ${g[k]}`);
  }
  if (worldSize(g) !== world) {
    throw new Error(
      `parallel.dp x parallel.tp x parallel.pp = ${g.dp} x ${g.tp} x ${g.pp} = ${worldSize(g)} must equal parallel.world (${world}): every rank is one cell of the grid; change --dp/--tp/--pp or --world`,
    );
  }
}

/**
 * A 3d job's grid and the checks a Megatron user expects, each naming the field and what to do.
 * (A vocabulary not divisible by tp is padded, as with --strategy tp.)
 */
export function validateThreeDJob(job: TrainJob): Grid {
  const par = job.parallel!;
  const g: Grid = { dp: par.dp ?? 1, tp: par.tp ?? 1, pp: par.pp ?? 1 };
  validateGrid(g, par.world);
  const m = job.model;
  if (m.n_head % g.tp !== 0)
    throw new Error(
      `model.n_head (${m.n_head}) must be divisible by parallel.tp (${g.tp}): each rank computes whole attention heads; pick --tp among the divisors of ${m.n_head}`,
    );
  if ((4 * m.d_model) % g.tp !== 0)
    throw new Error(`model.d_model (${m.d_model}) x 4 must be divisible by parallel.tp (${g.tp}) to split the MLP`);
  if (m.n_layer < g.pp)
    throw new Error(
      `model.n_layer ${m.n_layer} is smaller than parallel.pp ${g.pp}: every pipeline stage needs at least one block; lower --pp or use more layers`,
    );
  const B = job.train.batch_size;
  if (B % g.dp !== 0)
    throw new Error(`train.batch_size ${B} is not divisible by parallel.dp ${g.dp}: every data-parallel replica needs whole rows`);
  if ((B / g.dp) % par.micro_batches !== 0) {
    throw new Error(
      `parallel.micro_batches ${par.micro_batches} does not divide the per-replica batch (train.batch_size ${B} / parallel.dp ${g.dp} = ${B / g.dp} rows); pick --micro-batches among its divisors`,
    );
  }
  return g;
}
