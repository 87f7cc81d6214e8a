// bias-backward.wgsl on column quads (N % 4 == 0): partial (R, N) of row-chunk sums as vec4s.
struct Params { M: u32, N: u32, rows: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<vec4f>; // (R, N)
@group(0) @binding(1) var<storage, read_write> dout: array<vec4f>;    // (M, N)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let N4 = p.N / 4u;
  let col = wg.x * 64u + li;
  let r = wg.y;
  if (col >= N4) { return; }
  let m0 = r * p.rows;
  let m1 = min(m0 + p.rows, p.M);
  var s = vec4f(0.0);
  var idx = m0 * N4 + col;
  for (var m = m0; m < m1; m++) {
    s += dout[idx];
    idx += N4;
  }
  partial[r * N4 + col] = s;
}
