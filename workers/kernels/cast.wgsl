// out (n) = inp (n) in out's storage: the fp32 master weights rounded to the 16-bit compute copy
// after each optimizer step (round to nearest even, prelude: source.ts). W elements per invocation.
struct Params { nW: u32, _a: u32, _b: u32, _c: u32 } // nW = n / W
@group(0) @binding(0) var<storage, read_write> out: array<S>; // (n) compute precision
@group(0) @binding(1) var<storage, read_write> inp: array<V>; // (n) fp32
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  out[i] = st(inp[i]);
}
