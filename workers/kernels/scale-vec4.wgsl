// scale.wgsl on vec4s (n % 4 == 0): a quarter of the storage accesses.
// x (n) *= factor
struct Params { n4: u32, factor: f32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4f>; // (n)
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n4) { return; }
  x[i] = x[i] * p.factor;
}
