// dbias (N) [+]= column sums of dout (M, N), in two fixed-order passes (deterministic, no
// atomics). Pass 1 (this file): partial (R, N) = sums of dout over row chunk r of `rows` rows.
// Pass 2: colsum-finish.wgsl adds the R partials of each column in order.
struct Params { M: u32, N: u32, rows: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<f32>; // (R, N)
@group(0) @binding(1) var<storage, read_write> dout: array<f32>;    // (M, N)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let col = wg.x * 64u + li;
  let r = wg.y;
  if (col >= p.N) { return; }
  let m0 = r * p.rows;
  let m1 = min(m0 + p.rows, p.M);
  var s = 0.0;
  var idx = m0 * p.N + col;
  for (var m = m0; m < m1; m++) {
    s += dout[idx];
    idx += p.N;
  }
  partial[r * p.N + col] = s;
}
