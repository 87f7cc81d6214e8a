// Cross-entropy forward, one invocation per row n:
//   losses[n] = logsumexp(logits[n, :]) - logits[n, targets[n]]   (0 when targets[n] >= V: ignored)
struct Params { N: u32, V: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;  // (N)
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;  // (N, V)
@group(0) @binding(2) var<storage, read_write> targets: array<u32>; // (N)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let base = n * p.V;
  var mx = -3.0e38;
  for (var v = 0u; v < p.V; v++) { mx = max(mx, logits[base + v]); }
  var s = 0.0;
  for (var v = 0u; v < p.V; v++) { s += exp(logits[base + v] - mx); }
  let tgt = targets[n];
  var loss = 0.0;
  if (tgt < p.V) { loss = log(s) + mx - logits[base + tgt]; }
  losses[n] = loss;
}
