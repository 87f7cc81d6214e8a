// The 3D rank grid (Megatron's RankGenerator, order tp-dp-pp): one world of D x T x P ranks,
// tensor-parallel ranks adjacent, then data-parallel, then pipeline stages:
//   rank = pp * (D*T) + dp * T + tp
// so a TP group is T consecutive ranks (the chattiest collectives stay closest), a DP group the
// ranks with the same (pp, tp), a PP group the ranks with the same (dp, tp). Pure: no network.
// It lives in protocol/ because the layout is part of the launch contract: the controller
// names ranks by it, the ranks build their groups from it. Which grids a job may have (D x T x P
// = world, whole heads per TP rank, ...) is the strategy table's validate (common/strategies.ts).

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
