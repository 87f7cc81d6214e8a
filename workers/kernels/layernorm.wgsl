// Layernorm forward, one invocation per row (no barriers: cheap on software rasterizers), rows
// read W elements at a time (prelude: source.ts; C % W == 0):
//   mean[n] = mean(inp[n, :]); rstd[n] = 1 / sqrt(biased var + eps)
//   out[n, c] = (inp[n, c] - mean[n]) * rstd[n] * weight[c] + bias[c]
struct Params { N: u32, C: u32, eps: f32, _pad: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<S>;    // (N, C)
@group(0) @binding(1) var<storage, read_write> mean: array<f32>; // (N)
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>; // (N)
@group(0) @binding(3) var<storage, read_write> inp: array<S>;    // (N, C)
@group(0) @binding(4) var<storage, read_write> weight: array<S>; // (C)
@group(0) @binding(5) var<storage, read_write> bias: array<S>;   // (C)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li;
  if (row >= p.N) { return; }
  let CW = p.C / W;
  let base = row * CW;
  var s = V(0.0);
  for (var c = 0u; c < CW; c++) { s += ld(inp[base + c]); }
  let m = hsum(s) / f32(p.C);
  var v = V(0.0);
  for (var c = 0u; c < CW; c++) {
    let d = ld(inp[base + c]) - m;
    v += d * d;
  }
  let r = 1.0 / sqrt(hsum(v) / f32(p.C) + p.eps);
  for (var c = 0u; c < CW; c++) {
    out[base + c] = st((ld(inp[base + c]) - m) * r * ld(weight[c]) + ld(bias[c]));
  }
  mean[row] = m;
  rstd[row] = r;
}
