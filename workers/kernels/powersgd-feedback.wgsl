// PowerSGD's error feedback on a DDP bucket (workers/comm-hooks/powersgd-device.ts), fp32, W
// elements per invocation (prelude: source.ts). x is the bucket's gradients, e its error memory.
//   feed_in:  x = x * world + e; e = x     (error feedback on: e keeps what this rank meant to send)
//             x = x * world                (off: e is not bound to anything the hook reads)
//   residual: e = e - x                    (x now holds the decompressed result: e becomes the residue)
// x arrives scaled by 1/world (the loss carries DDP's division): times world it is this rank's
// mean gradient, PyTorch's bucket, so e, P and Q are PyTorch's numbers.
struct Params { nW: u32, world: f32, feedback: u32, _a: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<V>; // (n)
@group(0) @binding(1) var<storage, read_write> e: array<V>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

fn index(wg: vec3u, nwg: vec3u, li: u32) -> u32 { return (wg.x + wg.y * nwg.x) * 256u + li; }

@compute @workgroup_size(256)
fn feed_in(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = index(wg, nwg, li);
  if (i >= p.nW) { return; }
  if (p.feedback == 0u) {
    x[i] = x[i] * p.world;
    return;
  }
  let v = x[i] * p.world + e[i];
  x[i] = v;
  e[i] = v;
}

@compute @workgroup_size(256)
fn residual(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = index(wg, nwg, li);
  if (i >= p.nW) { return; }
  e[i] = e[i] - x[i];
}
