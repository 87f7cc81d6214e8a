// Vocab-parallel cross-entropy, pass 3 of 3, with the global max, sum of exponentials and target
// logit of each row (all-reduced). Rows whose target is >= V (the real vocabulary) are ignored.
//   losses[n] = log(rowSum[n]) + rowMax[n] - targetLogit[n]
//   writeGrad: logits (N, Vl) are overwritten by dlogits = (softmax - onehot) * dlossScale on the
//   valid columns and 0 on the padding columns (they never reach the loss)
// logits are read and written W at a time (prelude: source.ts; Vl % W == 0), each element computed
// in f32 and rounded once to the storage; losses stay f32.
struct Params { N: u32, Vl: u32, vValid: u32, vStart: u32, V: u32, writeGrad: u32, dlossScale: f32, _a: u32 }
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;      // (N)
@group(0) @binding(1) var<storage, read_write> logits: array<S>;        // (N, Vl) in: logits, out: dlogits
@group(0) @binding(2) var<storage, read_write> targets: array<u32>;     // (N)
@group(0) @binding(3) var<storage, read_write> rowMax: array<f32>;      // (N)
@group(0) @binding(4) var<storage, read_write> rowSum: array<f32>;      // (N)
@group(0) @binding(5) var<storage, read_write> targetLogit: array<f32>; // (N)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let tgt = targets[n];
  let mx = rowMax[n];
  let s = rowSum[n];
  var loss = 0.0;
  var scale = 0.0;
  if (tgt < p.V) {
    loss = log(s) + mx - targetLogit[n];
    scale = p.dlossScale;
  }
  losses[n] = loss;
  if (p.writeGrad == 0u) { return; }
  let base = n * (p.Vl / W);
  let inv = 1.0 / s;
  for (var i = 0u; i < p.Vl / W; i++) {
    let x = ld(logits[base + i]);
    var g = vec4f(0.0);
    for (var j = 0u; j < W; j++) {
      let v = i * W + j;
      if (v < p.vValid) {
        let prob = exp(elem(x, j) - mx) * inv;
        g[j] = (prob - select(0.0, 1.0, v + p.vStart == tgt)) * scale;
      }
    }
    logits[base + i] = st(lanes(g, 0u));
  }
}
