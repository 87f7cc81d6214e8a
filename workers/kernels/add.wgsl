// out (n) = a (n) + b (n)
struct Params { n: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>; // (n)
@group(0) @binding(1) var<storage, read_write> a: array<f32>;   // (n)
@group(0) @binding(2) var<storage, read_write> b: array<f32>;   // (n)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n) { return; }
  out[i] = a[i] + b[i];
}
