import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../workers/gpu/device.js';
import { packParams, Runtime } from '../../workers/gpu/runtime.js';

const ADD = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> a: array<f32>; // read_write: arena slices share one buffer
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
struct P { n: u32, scale: f32 }
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { out[g.x] = out[g.x] + a[g.x] * p.scale; }
}`;

describe('runtime: compile, prepare, replay, read back', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  it('replays a prepared kernel on arena slices and reads exact results', async () => {
    const arena = rt.allocator.arena('test', 'workspace', 4096);
    const a = arena.alloc('a', [100]);
    const out = arena.alloc('out', [100]);
    rt.write(
      a,
      Float32Array.from({ length: 100 }, (_, i) => i),
    );
    rt.clear(out);
    const d = rt.prepare('add', rt.compile('add', ADD), [a, out], packParams([100, { f32: 2 }]), [Math.ceil(100 / 64)]);
    rt.run(d);
    rt.run(d);
    d.setParams(packParams([100, { f32: -1 }]));
    rt.run(d);
    const r = await rt.read(out);
    expect(Array.from(r.slice(0, 4))).toEqual([0, 3, 6, 9]);
    expect(r[99]).toBe(99 * 3);
  });
});
