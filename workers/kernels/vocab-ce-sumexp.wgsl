// Vocab-parallel cross-entropy, pass 2 of 3: with the global row maximum (after the all-reduce),
//   rowSum[n] = sum over valid local columns of exp(logits[n, v] - rowMax[n])   (then all-reduced with sum)
// logits are read W at a time (prelude: source.ts; Vl % W == 0); the sum is f32, in column order.
struct Params { N: u32, Vl: u32, vValid: u32, _a: u32 }
@group(0) @binding(0) var<storage, read_write> rowSum: array<f32>; // (N)
@group(0) @binding(1) var<storage, read_write> rowMax: array<f32>; // (N), global
@group(0) @binding(2) var<storage, read_write> logits: array<S>;   // (N, Vl)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let base = n * (p.Vl / W);
  let nv = (p.vValid + W - 1u) / W;
  let mx = rowMax[n];
  var s = 0.0;
  for (var i = 0u; i < nv; i++) {
    let x = ld(logits[base + i]);
    for (var j = 0u; j < W; j++) {
      if (i * W + j < p.vValid) { s += exp(elem(x, j) - mx); }
    }
  }
  rowSum[n] = s;
}
