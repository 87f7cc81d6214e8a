// colsum-finish.wgsl on column quads (N % 4 == 0); base counts vec4s.
struct Params { N: u32, R: u32, accumulate: u32, base: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<vec4f>;     // (N)
@group(0) @binding(1) var<storage, read_write> partial: array<vec4f>; // (.., R, N)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let N4 = p.N / 4u;
  let col = wg.x * 64u + li;
  if (col >= N4) { return; }
  var s = vec4f(0.0);
  for (var r = 0u; r < p.R; r++) { s += partial[p.base + r * N4 + col]; }
  if (p.accumulate != 0u) { s = out[col] + s; }
  out[col] = s;
}
