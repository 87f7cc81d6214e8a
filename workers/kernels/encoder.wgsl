// out (B, T, C) = wte[idx[b, t]] + wpe[t]
struct Params { BT: u32, T: u32, C: u32, _pad: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>; // (B, T, C)
@group(0) @binding(1) var<storage, read_write> idx: array<u32>; // (B, T)
@group(0) @binding(2) var<storage, read_write> wte: array<f32>; // (V, C)
@group(0) @binding(3) var<storage, read_write> wpe: array<f32>; // (maxT, C)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.BT * p.C) { return; }
  let bt = i / p.C;
  let c = i - bt * p.C;
  let t = bt % p.T;
  out[i] = wte[idx[bt] * p.C + c] + wpe[t * p.C + c];
}
