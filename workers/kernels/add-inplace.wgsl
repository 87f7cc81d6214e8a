// dst (n) += src (n), W elements per invocation (prelude: source.ts).
struct Params { nW: u32, _a: u32, _b: u32, _c: u32 } // nW = n / W
@group(0) @binding(0) var<storage, read_write> dst: array<S>; // (n)
@group(0) @binding(1) var<storage, read_write> src: array<S>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  dst[i] = st(ld(dst[i]) + ld(src[i]));
}
