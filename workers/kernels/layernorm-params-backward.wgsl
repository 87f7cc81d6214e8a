// Layernorm backward, pass 2: partial sums over row chunk r of `rows` rows, one invocation per
// W columns (prelude: source.ts; C % W == 0), in a fixed order (deterministic):
//   partial[0, r, c] = sum dout[n, c] * norm[n, c]   (dweight)
//   partial[1, r, c] = sum dout[n, c]                (dbias)
// colsum-finish.wgsl then adds the R chunks of each column into dweight and dbias.
struct Params { N: u32, C: u32, rows: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<V>; // (2, R, C) fp32 workspace
@group(0) @binding(1) var<storage, read_write> dout: array<S>;    // (N, C)
@group(0) @binding(2) var<storage, read_write> inp: array<S>;     // (N, C)
@group(0) @binding(3) var<storage, read_write> mean: array<f32>;  // (N)
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;  // (N)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let CW = p.C / W;
  let c = wg.x * 64u + li;
  let r = wg.y;
  if (c >= CW) { return; }
  let n0 = r * p.rows;
  let n1 = min(n0 + p.rows, p.N);
  var sw = V(0.0);
  var sb = V(0.0);
  for (var n = n0; n < n1; n++) {
    let d = ld(dout[n * CW + c]);
    sw += d * (ld(inp[n * CW + c]) - mean[n]) * rstd[n];
    sb += d;
  }
  partial[r * CW + c] = sw;
  partial[(p.R + r) * CW + c] = sb;
}
