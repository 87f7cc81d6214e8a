// Vocab-parallel cross-entropy, pass 1 of 3, one invocation per row n of this rank's logits
// shard (columns = vocabulary ids vStart .. vStart+Vl-1, of which the first vValid are real
// tokens; the rest pad the vocabulary to a multiple of the TP size and are masked out):
//   rowMax[n]    = max over valid local columns   (then all-reduced with max)
//   targetLogit[n] = logits[n, targets[n] - vStart] if this rank owns the target, else 0 (then all-reduced with sum)
// logits are read W at a time (prelude: source.ts; Vl % W == 0); the statistics are f32.
struct Params { N: u32, Vl: u32, vValid: u32, vStart: u32 }
@group(0) @binding(0) var<storage, read_write> rowMax: array<f32>;      // (N)
@group(0) @binding(1) var<storage, read_write> targetLogit: array<f32>; // (N)
@group(0) @binding(2) var<storage, read_write> logits: array<S>;        // (N, Vl)
@group(0) @binding(3) var<storage, read_write> targets: array<u32>;     // (N)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let n = (wg.x + wg.y * nwg.x) * 64u + li;
  if (n >= p.N) { return; }
  let base = n * (p.Vl / W);
  let nv = (p.vValid + W - 1u) / W; // vectors holding valid columns
  var mx = -3.0e38;
  for (var i = 0u; i < nv; i++) {
    let x = ld(logits[base + i]);
    for (var j = 0u; j < W; j++) {
      if (i * W + j < p.vValid) { mx = max(mx, elem(x, j)); }
    }
  }
  rowMax[n] = mx;
  let tgt = targets[n];
  var tl = 0.0;
  if (tgt >= p.vStart && tgt - p.vStart < p.vValid) {
    let c = tgt - p.vStart;
    tl = elem(ld(logits[base + c / W]), c % W);
  }
  targetLogit[n] = tl;
}
