// Softmax cross-entropy, fused with its gradient, one invocation per row n of logits (N, Vp):
// the first V columns are the vocabulary, columns V .. Vp-1 pad it (16-bit storage reads rows in
// vectors of 4; llm.c's padded vocabulary) and never reach the loss:
//   losses[n] = logsumexp(logits[n, :V]) - logits[n, t],  t = targets[n]
//   writeGrad != 0: logits[n, :] are overwritten with dlogits[n, v] = (softmax(logits[n, :V])[v] - (v == t)) * dlossScale
//                   for v < V, 0 on the padding columns
// Rows with t >= V are ignored: loss 0, gradient 0. Row n is read fully before it is
// overwritten (in place: WebGPU refuses to bind one range twice when one binding is writable).
// logits are read W at a time (prelude: source.ts; Vp % W == 0) but every statistic is f32 and
// taken element by element in column order, so the losses have the same bits at every W and
// storage of the same values; only dlogits are rounded to the storage.
struct Params { N: u32, V: u32, Vp: u32, writeGrad: u32, dlossScale: f32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;  // (N)
@group(0) @binding(1) var<storage, read_write> logits: array<S>;    // (N, Vp) in: logits, out: dlogits when writeGrad
@group(0) @binding(2) var<storage, read_write> targets: array<u32>; // (N)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let base = n * (p.Vp / W);
  let nv = (p.V + W - 1u) / W; // vectors holding vocabulary columns
  var mx = -3.0e38;
  for (var i = 0u; i < nv; i++) {
    let x = ld(logits[base + i]);
    for (var j = 0u; j < W; j++) {
      if (i * W + j < p.V) { mx = max(mx, elem(x, j)); }
    }
  }
  var s = 0.0;
  for (var i = 0u; i < nv; i++) {
    let x = ld(logits[base + i]);
    for (var j = 0u; j < W; j++) {
      if (i * W + j < p.V) { s += exp(elem(x, j) - mx); }
    }
  }
  let tgt = targets[n];
  var loss = 0.0;
  var scale = 0.0;
  if (tgt < p.V) {
    loss = log(s) + mx - elem(ld(logits[base + tgt / W]), tgt % W);
    scale = p.dlossScale;
  }
  losses[n] = loss;
  if (p.writeGrad == 0u) { return; }
  let inv = 1.0 / s;
  for (var i = 0u; i < p.Vp / W; i++) {
    let x = ld(logits[base + i]);
    var g = vec4f(0.0);
    for (var j = 0u; j < W; j++) {
      let v = i * W + j;
      if (v < p.V) {
        let prob = exp(elem(x, j) - mx) * inv;
        g[j] = (prob - select(0.0, 1.0, v == tgt)) * scale;
      }
    }
    logits[base + i] = st(lanes(g, 0u));
  }
}
