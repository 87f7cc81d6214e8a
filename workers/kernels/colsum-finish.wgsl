// out (N) [+]= sum over r of partial[base + r * N + n] (R, N), r in increasing order (deterministic).
struct Params { N: u32, R: u32, accumulate: u32, base: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;     // (N)
@group(0) @binding(1) var<storage, read_write> partial: array<f32>; // (.., R, N), this pass reads from element base
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let col = wg.x * 64u + li;
  if (col >= p.N) { return; }
  var s = 0.0;
  for (var r = 0u; r < p.R; r++) { s += partial[p.base + r * p.N + col]; }
  if (p.accumulate != 0u) { s = out[col] + s; }
  out[col] = s;
}
