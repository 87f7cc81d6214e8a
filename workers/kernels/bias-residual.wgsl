// The end of a row-parallel linear (Megatron's RowParallelLinear with its residual): after the
// all-reduce of the partial products, the bias is added once and the residual stream joins:
//   out (N, C) = res (N, C) + (sum (N, C) + bias (C) broadcast over rows)
// out may not alias res or sum (one binding per range).
struct Params { n: u32, C: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (N, C)
@group(0) @binding(1) var<storage, read_write> res: array<f32>;  // (N, C)
@group(0) @binding(2) var<storage, read_write> sum: array<f32>;  // (N, C)
@group(0) @binding(3) var<storage, read_write> bias: array<f32>; // (C)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n) { return; }
  out[i] = res[i] + (sum[i] + bias[i % p.C]);
}
