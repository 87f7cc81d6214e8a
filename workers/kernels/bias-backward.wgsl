// dbias (N) [+]= column sums of dout (M, N), in two fixed-order passes (deterministic, no
// atomics). Pass 1 (this file): partial (R, N) = sums of dout over row chunk r of `rows` rows,
// one invocation per W columns (prelude: source.ts; N % W == 0).
// Pass 2: colsum-finish.wgsl adds the R partials of each column in order.
struct Params { M: u32, N: u32, rows: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<V>; // (R, N) fp32 workspace
@group(0) @binding(1) var<storage, read_write> dout: array<S>;    // (M, N)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let NW = p.N / W;
  let col = wg.x * 64u + li;
  let r = wg.y;
  if (col >= NW) { return; }
  let m0 = r * p.rows;
  let m1 = min(m0 + p.rows, p.M);
  var s = V(0.0);
  var idx = m0 * NW + col;
  for (var m = m0; m < m1; m++) {
    s += ld(dout[idx]);
    idx += NW;
  }
  partial[r * NW + col] = s;
}
