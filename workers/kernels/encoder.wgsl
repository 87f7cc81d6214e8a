// Token + position embedding. One source for the single device and for a rank of a
// vocab-parallel group (Megatron's VocabParallelEmbedding), which holds rows
// [vStart, vStart + Vl) of the (padded) token table; the single device holds them all:
//   out (B, T, C) = (vStart <= idx < vStart + Vl ? wte[idx - vStart] : 0) + (addPositions ? wpe[t] : 0)
// Summing every rank's out (all-reduce) gives wte[idx] + wpe[t] with the same bits as the
// single device: exactly one rank adds a non-zero token row and one adds the position row.
// W elements of one row per invocation (prelude: source.ts; C % W == 0); each element is the
// same one f32 addition at every W, rounded once to the storage.
struct Params { BT: u32, T: u32, C: u32, vStart: u32, Vl: u32, addPositions: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<S>;   // (B, T, C)
@group(0) @binding(1) var<storage, read_write> idx: array<u32>; // (B, T)
@group(0) @binding(2) var<storage, read_write> wte: array<S>;   // (Vl, C) rows vStart .. vStart+Vl-1
@group(0) @binding(3) var<storage, read_write> wpe: array<S>;   // (maxT, C)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  let CW = p.C / W;
  if (i >= p.BT * CW) { return; }
  let bt = i / CW;
  let c = i - bt * CW;
  let t = bt % p.T;
  let v = idx[bt];
  var tok = V(0.0);
  if (v >= p.vStart && v - p.vStart < p.Vl) { tok = ld(wte[(v - p.vStart) * CW + c]); }
  var pos = V(0.0);
  if (p.addPositions != 0u) { pos = ld(wpe[t * CW + c]); }
  out[i] = st(tok + pos);
}
