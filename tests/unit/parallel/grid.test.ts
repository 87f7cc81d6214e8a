import { describe, expect, it } from 'vitest';
import { coordsOf, dpGroups, embeddingGroups, groupsOf, ppGroups, rankOf, tpGroups } from '../../../workers/protocol/grid.js';

// Megatron's RankGenerator with order "tp-dp-pp": TP ranks adjacent, then DP, then PP.
describe('3D rank grid', () => {
  it('D=2, T=2, P=2: the groups Megatron builds for 8 ranks', () => {
    const g = { dp: 2, tp: 2, pp: 2 };
    expect(tpGroups(g)).toEqual([
      [0, 1],
      [2, 3],
      [4, 5],
      [6, 7],
    ]);
    expect(dpGroups(g)).toEqual([
      [0, 2],
      [1, 3],
      [4, 6],
      [5, 7],
    ]);
    expect(ppGroups(g)).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 7],
    ]);
    expect(embeddingGroups(g)).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 7],
    ]);
    expect(coordsOf(g, 6)).toEqual({ tp: 0, dp: 1, pp: 1 });
    expect(groupsOf(g, 5)).toEqual({ tp: [4, 5], dp: [5, 7], pp: [1, 5] });
  });

  it('every rank: rank = pp*(D*T) + dp*T + tp round-trips, and each family of groups partitions the world', () => {
    for (const g of [
      { dp: 2, tp: 4, pp: 2 },
      { dp: 3, tp: 1, pp: 4 },
      { dp: 1, tp: 2, pp: 3 },
      { dp: 2, tp: 2, pp: 1 },
    ]) {
      const n = g.dp * g.tp * g.pp;
      for (let r = 0; r < n; r++) expect(rankOf(g, coordsOf(g, r))).toBe(r);
      for (const [family, size] of [
        [tpGroups(g), g.tp],
        [dpGroups(g), g.dp],
        [ppGroups(g), g.pp],
      ] as const) {
        expect(family.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i));
        for (const grp of family) expect(grp).toHaveLength(size);
      }
      // a TP group is consecutive ranks; a PP group's stages are its order
      for (const grp of tpGroups(g)) expect(grp).toEqual(grp.map((_, i) => grp[0]! + i));
      for (const grp of ppGroups(g)) grp.forEach((r, s) => expect(coordsOf(g, r).pp).toBe(s));
      for (const grp of dpGroups(g)) expect(new Set(grp.map((r) => `${coordsOf(g, r).pp},${coordsOf(g, r).tp}`)).size).toBe(1);
    }
    expect(embeddingGroups({ dp: 2, tp: 2, pp: 1 })).toEqual([]);
  });

  it('a rank outside the grid is refused, naming the grid', () => {
    expect(() => coordsOf({ dp: 2, tp: 2, pp: 2 }, 8)).toThrow(/outside the 2x2x2 grid/);
    expect(() => coordsOf({ dp: 2, tp: 2, pp: 2 }, -1)).toThrow(/rank -1 is outside the 2x2x2 grid/);
  });
});
