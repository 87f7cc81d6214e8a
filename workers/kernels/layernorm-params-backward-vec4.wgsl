// Layernorm backward pass 2 on column quads (C % 4 == 0): layernorm-params-backward.wgsl with
// one invocation per 4 columns; partial (2, R, C) as vec4s.
struct Params { N: u32, C: u32, rows: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<vec4f>; // (2, R, C)
@group(0) @binding(1) var<storage, read_write> dout: array<vec4f>;    // (N, C)
@group(0) @binding(2) var<storage, read_write> inp: array<vec4f>;     // (N, C)
@group(0) @binding(3) var<storage, read_write> mean: array<f32>;      // (N)
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;      // (N)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let C4 = p.C / 4u;
  let c = wg.x * 64u + li;
  let r = wg.y;
  if (c >= C4) { return; }
  let n0 = r * p.rows;
  let n1 = min(n0 + p.rows, p.N);
  var sw = vec4f(0.0);
  var sb = vec4f(0.0);
  for (var n = n0; n < n1; n++) {
    let d = dout[n * C4 + c];
    sw += d * (inp[n * C4 + c] - mean[n]) * rstd[n];
    sb += d;
  }
  partial[r * C4 + c] = sw;
  partial[(p.R + r) * C4 + c] = sb;
}
