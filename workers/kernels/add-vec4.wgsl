// add.wgsl on vec4s (n % 4 == 0): a quarter of the storage accesses.
// out (n) = a (n) + b (n)
struct Params { n4: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<vec4f>; // (n)
@group(0) @binding(1) var<storage, read_write> a: array<vec4f>;   // (n)
@group(0) @binding(2) var<storage, read_write> b: array<vec4f>;   // (n)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n4) { return; }
  out[i] = a[i] + b[i];
}
