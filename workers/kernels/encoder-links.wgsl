// Encoder backward, pass 1: chain the positions that share a token id, so pass 2 can sum
// each token's gradient rows in position order without atomics.
//   links[2p]     = next position q > p with idx[q] == idx[p], or 0xffffffff
//   links[2p + 1] = 1 when p is the first position of its token id, else 0
struct Params { BT: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> links: array<u32>; // (B*T, 2)
@group(0) @binding(1) var<storage, read_write> idx: array<u32>;   // (B, T)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let pos = (wg.x + wg.y * nwg.x) * 64u + li;
  if (pos >= p.BT) { return; }
  let id = idx[pos];
  var head = 1u;
  for (var q = 0u; q < pos; q++) {
    if (idx[q] == id) { head = 0u; break; }
  }
  var next = 0xffffffffu;
  for (var q = pos + 1u; q < p.BT; q++) {
    if (idx[q] == id) { next = q; break; }
  }
  links[2u * pos] = next;
  links[2u * pos + 1u] = head;
}
