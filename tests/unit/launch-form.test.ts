// The launch form's pure parts (src-renderer/src/launch-form.ts): the knobs each strategy shows,
// the world they make, each rank's role in Megatron's grid, and the placement the API receives.
import { describe, expect, it } from 'vitest';
import { LaunchConfigSchema } from '../../common/api/index.js';
import {
  compressionConfig,
  knobsOf,
  parallelConfig,
  placementConfig,
  rankRole,
  resizePlacement,
  worldOf,
} from '../../src-renderer/src/launch-form.js';
import { coordsOf } from '../../workers/protocol/grid.js';

const knobs = (strategy: string) => ({ strategy, world: 3, tp: 2, pp: 4, dp: 2, schedule: 'gpipe' as const });

describe('launch form', () => {
  it('shows T, P, D and the schedule only where they apply', () => {
    expect(knobsOf('ddp')).toEqual({ world: true, tp: false, pp: false, dp: false, schedule: false });
    expect(knobsOf('single').world).toBe(false);
    expect(knobsOf('tp')).toEqual({ world: false, tp: true, pp: false, dp: false, schedule: false });
    expect(knobsOf('pp')).toEqual({ world: false, tp: false, pp: true, dp: false, schedule: true });
    expect(knobsOf('3d')).toEqual({ world: false, tp: true, pp: true, dp: true, schedule: true });
  });

  it('makes the world from the knobs and sends only the fields that apply', () => {
    expect(worldOf(knobs('ddp'))).toBe(3);
    expect(worldOf(knobs('tp'))).toBe(2);
    expect(worldOf(knobs('pp'))).toBe(4);
    expect(worldOf(knobs('3d'))).toBe(16);
    expect(parallelConfig(knobs('ddp'))).toEqual({ strategy: 'ddp', world: 3 });
    expect(parallelConfig(knobs('pp'))).toEqual({ strategy: 'pp', world: 4, pp: 4, schedule: 'gpipe' });
    expect(parallelConfig(knobs('tp'))).toEqual({ strategy: 'tp', world: 2, tp: 2 });
    const three = parallelConfig(knobs('3d'));
    expect(three).toEqual({ strategy: '3d', world: 16, tp: 2, pp: 4, dp: 2, schedule: 'gpipe' });
    expect(LaunchConfigSchema.safeParse(three).success).toBe(true);
  });

  it('sends the gradient compression only where the strategy takes it (ddp, zero1, zero2), PowerSGD with its rank and start', () => {
    const psgd = { compression: 'powersgd' as const, powersgd_rank: 4, powersgd_start: 2 as const };
    expect(compressionConfig('ddp', psgd)).toEqual({ hook: 'powersgd', matrix_approximation_rank: 4, start_powerSGD_iter: 2 });
    expect(compressionConfig('ddp', { ...psgd, powersgd_start: '' })).toEqual({ hook: 'powersgd', matrix_approximation_rank: 4 });
    expect(compressionConfig('zero2', { ...psgd, compression: 'bf16' })).toEqual({ hook: 'bf16' });
    // PowerSGD on ZeRO is sent: the resolver refuses it and names the field the form highlights
    expect(compressionConfig('zero1', psgd)).toEqual({ hook: 'powersgd', matrix_approximation_rank: 4, start_powerSGD_iter: 2 });
    expect(compressionConfig('ddp', { ...psgd, compression: 'none' })).toBeUndefined();
    for (const s of ['single', 'dp', 'zero3', 'tp', 'pp', '3d'])
      expect(compressionConfig(s, { ...psgd, compression: 'fp16' })).toBeUndefined();
    expect(LaunchConfigSchema.safeParse({ strategy: 'ddp', grad_compression: compressionConfig('ddp', psgd) }).success).toBe(true);
  });

  it("names each 3d rank by its grid coordinates, in the rank grid's order", () => {
    const k = knobs('3d');
    for (let r = 0; r < 16; r++) {
      const c = coordsOf({ dp: 2, tp: 2, pp: 4 }, r);
      expect(rankRole(k, r)).toBe(`dp ${c.dp} · tp ${c.tp} · stage ${c.pp}`);
    }
    expect(rankRole(knobs('pp'), 1)).toBe('stage 1 of 4');
  });

  it('places every rank locally on the default device unless told otherwise, keeping choices on resize', () => {
    let rows = resizePlacement([], 2);
    expect(placementConfig(rows)).toBeUndefined();
    rows[1] = { machine: '10.0.0.2:7341', device: '1' };
    rows = resizePlacement(rows, 3);
    expect(rows).toHaveLength(3);
    const p = placementConfig(rows);
    expect(p).toEqual([{ machine: 'local' }, { machine: '10.0.0.2:7341', device: '1' }, { machine: 'local' }]);
    expect(LaunchConfigSchema.safeParse({ placement: p }).success).toBe(true);
    expect(resizePlacement(rows, 1)).toEqual([{ machine: 'local', device: '' }]);
  });
});
