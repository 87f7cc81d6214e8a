// The end of a row-parallel linear (Megatron's RowParallelLinear with its residual): after the
// all-reduce of the partial products, the bias is added once and the residual stream joins:
//   out (N, C) = res (N, C) + (sum (N, C) + bias (C) broadcast over rows)
// out may not alias res or sum (one binding per range). W elements of one row per invocation
// (prelude: source.ts; C % W == 0): the same two f32 additions per element at every W, then
// one rounding to the storage.
struct Params { nW: u32, CW: u32, _a: u32, _b: u32 } // nW = N * C / W, CW = C / W
@group(0) @binding(0) var<storage, read_write> out: array<S>;  // (N, C)
@group(0) @binding(1) var<storage, read_write> res: array<S>;  // (N, C)
@group(0) @binding(2) var<storage, read_write> sum: array<S>;  // (N, C)
@group(0) @binding(3) var<storage, read_write> bias: array<S>; // (C)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  out[i] = st(ld(res[i]) + (ld(sum[i]) + ld(bias[i % p.CW])));
}
