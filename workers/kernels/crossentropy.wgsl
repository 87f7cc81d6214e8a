// Softmax cross-entropy, fused with its gradient, one invocation per row n:
//   losses[n] = logsumexp(logits[n, :]) - logits[n, t],  t = targets[n]
//   writeGrad != 0: logits[n, :] are overwritten with dlogits[n, v] = (softmax(logits[n, :])[v] - (v == t)) * dlossScale
// Rows with t >= V are ignored: loss 0, gradient 0. Row n is read fully before it is
// overwritten (in place: WebGPU refuses to bind one range twice when one binding is writable).
struct Params { N: u32, V: u32, dlossScale: f32, writeGrad: u32 }
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;  // (N)
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;  // (N, V) in: logits, out: dlogits when writeGrad
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
  var scale = 0.0;
  if (tgt < p.V) {
    loss = log(s) + mx - logits[base + tgt];
    scale = p.dlossScale;
  }
  losses[n] = loss;
  if (p.writeGrad == 0u) { return; }
  let inv = 1.0 / s;
  for (var v = 0u; v < p.V; v++) {
    let prob = exp(logits[base + v] - mx) * inv;
    logits[base + v] = (prob - select(0.0, 1.0, v == tgt)) * scale;
  }
}
