// Layernorm forward on vec4 rows (C % 4 == 0): layernorm.wgsl with a quarter of the accesses.
struct Params { N: u32, C: u32, eps: f32, _pad: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<vec4f>;    // (N, C)
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;     // (N)
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;     // (N)
@group(0) @binding(3) var<storage, read_write> inp: array<vec4f>;    // (N, C)
@group(0) @binding(4) var<storage, read_write> weight: array<vec4f>; // (C)
@group(0) @binding(5) var<storage, read_write> bias: array<vec4f>;   // (C)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li;
  if (row >= p.N) { return; }
  let C4 = p.C / 4u;
  let base = row * C4;
  var s = vec4f(0.0);
  for (var c = 0u; c < C4; c++) { s += inp[base + c]; }
  let m = (s.x + s.y + s.z + s.w) / f32(p.C);
  var v = vec4f(0.0);
  for (var c = 0u; c < C4; c++) {
    let d = inp[base + c] - m;
    v += d * d;
  }
  let r = 1.0 / sqrt((v.x + v.y + v.z + v.w) / f32(p.C) + p.eps);
  for (var c = 0u; c < C4; c++) {
    out[base + c] = (inp[base + c] - m) * r * weight[c] + bias[c];
  }
  mean[row] = m;
  rstd[row] = r;
}
