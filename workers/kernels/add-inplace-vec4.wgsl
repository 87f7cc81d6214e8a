// add-inplace.wgsl on vec4s (n % 4 == 0): a quarter of the storage accesses.
// dst (n) += src (n)
struct Params { n4: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<vec4f>; // (n)
@group(0) @binding(1) var<storage, read_write> src: array<vec4f>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n4) { return; }
  dst[i] = dst[i] + src[i];
}
