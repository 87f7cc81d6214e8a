// Embedding backward, pass 2 (after encoder-links.wgsl), for the single device and for a rank
// of a vocab-parallel group holding token rows [vStart, vStart + Vl) (the single device holds
// them all). A token outside the rank's rows adds nothing to dwte (its owner adds it); dwpe gets
// the whole gradient on every rank (the position table is replicated). W columns per invocation
// (prelude: source.ts; C % W == 0), CW = C / W:
//   invocations 0 .. B*T*CW-1:      dwte[idx[p] - vStart, c] += sum of dout[q, c] over the chain of positions q from head p
//   invocations B*T*CW .. +T*CW-1:  dwpe[t, c] += sum over b of dout[b, t, c]
// Each output element is written by exactly one invocation, in a fixed order: deterministic.
// Every sum is f32, in position order, and meets dwte / dwpe once: dwte[o] = st(ld(dwte[o]) + s),
// so 16-bit storage rounds once per element however many positions share a token.
struct Params { BT: u32, T: u32, C: u32, B: u32, vStart: u32, Vl: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> dwte: array<S>;    // (Vl, C)
@group(0) @binding(1) var<storage, read_write> dwpe: array<S>;    // (maxT, C)
@group(0) @binding(2) var<storage, read_write> dout: array<S>;    // (B, T, C)
@group(0) @binding(3) var<storage, read_write> idx: array<u32>;   // (B, T)
@group(0) @binding(4) var<storage, read_write> links: array<u32>; // (B*T, 2)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 64u + li;
  let CW = p.C / W;
  let nte = p.BT * CW;
  if (i < nte) {
    let pos = i / CW;
    let c = i - pos * CW;
    if (links[2u * pos + 1u] == 0u) { return; }
    let v = idx[pos];
    if (v < p.vStart || v - p.vStart >= p.Vl) { return; }
    var s = V(0.0);
    var q = pos;
    loop {
      s += ld(dout[q * CW + c]);
      q = links[2u * q];
      if (q == 0xffffffffu) { break; }
    }
    let o = (v - p.vStart) * CW + c;
    dwte[o] = st(ld(dwte[o]) + s);
    return;
  }
  let j = i - nte;
  if (j >= p.T * CW) { return; }
  var s = V(0.0);
  let stride = p.T * CW;
  var k = j;
  for (var b = 0u; b < p.B; b++) {
    s += ld(dout[k]);
    k += stride;
  }
  dwpe[j] = st(ld(dwpe[j]) + s);
}
