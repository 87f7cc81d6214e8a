// Deterministic reduction, pass 1: partial[j] = sum of f(inp[i]) over i = j, j + P, j + 2P, ...
// with f(x) = x, or x * x when square != 0. P is fixed by n alone, so the order never changes.
struct Params { n: u32, P: u32, square: u32, _pad: u32 }
@group(0) @binding(0) var<storage, read_write> partial: array<f32>; // (P)
@group(0) @binding(1) var<storage, read_write> inp: array<f32>;     // (n)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = wg.x * 64u + li;
  if (j >= p.P) { return; }
  var s = 0.0;
  if (p.square != 0u) {
    for (var i = j; i < p.n; i += p.P) { let x = inp[i]; s += x * x; }
  } else {
    for (var i = j; i < p.n; i += p.P) { s += inp[i]; }
  }
  partial[j] = s;
}
