// Vocab-parallel cross-entropy, pass 2 of 3: with the global row maximum (after the all-reduce),
//   rowSum[n] = sum over valid local columns of exp(logits[n, v] - rowMax[n])   (then all-reduced with sum)
struct Params { N: u32, Vl: u32, vValid: u32, _a: u32 }
@group(0) @binding(0) var<storage, read_write> rowSum: array<f32>; // (N)
@group(0) @binding(1) var<storage, read_write> rowMax: array<f32>; // (N), global
@group(0) @binding(2) var<storage, read_write> logits: array<f32>; // (N, Vl)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let base = n * p.Vl;
  let mx = rowMax[n];
  var s = 0.0;
  for (var v = 0u; v < p.vValid; v++) { s += exp(logits[base + v] - mx); }
  rowSum[n] = s;
}
