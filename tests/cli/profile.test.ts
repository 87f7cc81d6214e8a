// `shardwise profile`: a valid machine profile (with the speedup of two processes sharing each
// adapter, on whole steps and on single kernels) within the 30 s limit, stored in the
// controller's data dir and read back by the next call instead of measuring again. --quick
// keeps CI short (tiny's kernels, small copies and links, short sharing windows); the full
// calibration runs the same code longer.
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MachineProfileSchema } from '../../common/advisor/profile.js';
import { BIN, tempDir } from './helpers.js';
import { median } from '../../common/stats.js';

const home = tempDir('profile');

function profile(args: string[], dir = home) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [BIN, 'profile', ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, SHARDWISE_HOME: dir, SHARDWISE_DEBUG: '' },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - t0 };
}

describe('shardwise profile', () => {
  it('--json --quick: every kernel of a step, two processes sharing the adapter, copy rates and shm/tcp links, within 30 s; a second call reads the stored profile', () => {
    const first = profile(['--json', '--quick']);
    expect(first.code, first.stderr).toBe(0);
    const p = MachineProfileSchema.parse(JSON.parse(first.stdout));
    expect(p.duration_ms!).toBeLessThanOrEqual(30_000);
    expect(p.sizes).toEqual(['tiny']);
    expect(p.adapters.length).toBeGreaterThan(0);
    for (const a of p.adapters) {
      expect(new Set(a.kernels.map((k) => k.op))).toEqual(
        new Set(['encoder', 'layernorm', 'matmul', 'attention', 'gelu', 'crossentropy', 'adamw']),
      );
      for (const k of a.kernels) expect(k.ms, `${k.op} ${k.shape}`).toBeGreaterThan(0);
      // the fixed costs the time model adds: a 64-element launch costs less than the median real launch of a step
      expect(a.launch_ms, 'launch_ms').toBeGreaterThan(0);
      expect(a.launch_ms!, 'launch_ms').toBeLessThan(median(a.kernels.map((k) => k.ms)));
      expect(a.sync_ms, 'sync_ms').toBeGreaterThanOrEqual(0);
      // the qkv matmul of tiny: B·T = 512 rows, 3C = 192 columns, C = 64 deep
      expect(a.kernels.find((k) => k.shape === 'tiny qkv: M=512 N=192 K=64 tB')?.flops).toBe(2 * 512 * 192 * 64 + 512 * 192);
      // two processes each running a rank's whole step at tiny's micro-batches for 2 ranks (B/2, B/8), then one kernel at
      // once: each distinct matmul size of tiny and GELU forward
      expect(a.shared?.map((x) => `${x.k} ${x.op}`)).toEqual([
        '2 step',
        '2 step',
        '2 matmul',
        '2 matmul',
        '2 matmul',
        '2 matmul',
        '2 gelu',
      ]);
      for (const x of a.shared!) expect(Number.isFinite(x.speedup) && x.speedup > 0, `${x.shape}: x${x.speedup}`).toBe(true);
      const steps = a.shared!.filter((x) => x.op === 'step');
      expect(steps.map((x) => [x.shape, x.batch, x.whole_batch])).toEqual([
        ['tiny step B=4', 4, 8],
        ['tiny step B=1', 1, 8],
      ]);
      // its size: the mean FLOPs of the 11 matmul and attention cases of tiny's step at B=4 (profile-kernels.ts stepCases)
      expect(steps[0]!.flops).toBeCloseTo(5_858_024.73, 1);
      for (const x of steps) {
        expect(x.launches, x.shape).toBeGreaterThanOrEqual(18);
        // one alone, each of k at once, one at the whole batch alone
        for (const ms of [x.alone_ms, x.shared_ms, x.whole_batch_ms]) expect(ms, x.shape).toBeGreaterThan(0);
      }
      expect(a.h2d_gbps).toBeGreaterThan(0);
      expect(a.d2h_gbps).toBeGreaterThan(0);
    }
    expect(p.links.map((l) => l.kind).sort()).toEqual(['shm', 'tcp']);
    expect(existsSync(path.join(home, 'machine-profile.json'))).toBe(true);

    const second = profile(['--json', '--quick']);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toEqual(JSON.parse(first.stdout));
  });

  it('refuses bad input and a damaged stored profile in one line that says what to do', () => {
    const bad = profile(['--preset', 'huge']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toMatch(/^shardwise: --preset: unknown preset "huge"; choose from tiny, small/);
    const dir = tempDir('profile-bad');
    writeFileSync(path.join(dir, 'machine-profile.json'), '{"machine": 1}');
    const damaged = profile(['--quick'], dir);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr.trim().split('\n')).toHaveLength(1);
    expect(damaged.stderr).toMatch(/is not a machine profile .*shardwise profile --refresh/);
  });
});
