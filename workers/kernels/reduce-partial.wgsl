// Deterministic reduction, pass 1: partial[j] = sum of f(inp[i]) over i = j, j + P, j + 2P, ...
// with f(x) = x, or x * x when square != 0; i counts S elements (W values each, prelude: source.ts),
// whose lanes add in lane order. P is fixed by n alone, so the order never changes.
struct Params { nW: u32, P: u32, square: u32, _pad: u32 } // nW = n / W
@group(0) @binding(0) var<storage, read_write> partial: array<f32>; // (P)
@group(0) @binding(1) var<storage, read_write> inp: array<S>;       // (n)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = wg.x * 64u + li;
  if (j >= p.P) { return; }
  var s = 0.0;
  if (p.square != 0u) {
    for (var i = j; i < p.nW; i += p.P) { let x = ld(inp[i]); s += hsum(x * x); }
  } else {
    for (var i = j; i < p.nW; i += p.P) { s += hsum(ld(inp[i])); }
  }
  partial[j] = s;
}
