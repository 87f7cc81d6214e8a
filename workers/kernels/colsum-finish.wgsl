// out (N) [+]= sum over r of partial[base + r * N + n] (R, N), r in increasing order
// (deterministic); one invocation per W columns (prelude: source.ts; N % W == 0).
struct Params { N: u32, R: u32, accumulate: u32, base: u32 } // base counts elements / W
@group(0) @binding(0) var<storage, read_write> out: array<S>;     // (N)
@group(0) @binding(1) var<storage, read_write> partial: array<V>; // (.., R, N) fp32 workspace, read from base
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let NW = p.N / W;
  let col = wg.x * 64u + li;
  if (col >= NW) { return; }
  var s = V(0.0);
  for (var r = 0u; r < p.R; r++) { s += partial[p.base + r * NW + col]; }
  if (p.accumulate != 0u) { s = ld(out[col]) + s; }
  out[col] = st(s);
}
