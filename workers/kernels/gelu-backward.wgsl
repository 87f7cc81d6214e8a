// GELU backward in place, W elements per invocation: d (n) holds dout on entry and
// dinp = dout * gelu'(inp) on exit (one binding: WebGPU refuses to bind one range twice).
//   u = sqrt(2/pi) (x + 0.044715 x^3); gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
struct Params { nW: u32, _a: u32, _b: u32, _c: u32 } // nW = n / W
@group(0) @binding(0) var<storage, read_write> d: array<S>;   // (n)
@group(0) @binding(1) var<storage, read_write> inp: array<S>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

const S2PI = 0.7978845608028654;

// s = 0.5 (1 + tanh u) = 1 / (1 + e), e = exp(-2u); 1 - tanh^2 u = 4 s (1 - s) = 4 s^2 e: no
// cancellation for negative x (see gelu.wgsl).
fn gelu_grad(x: V) -> V {
  let u = S2PI * (x + 0.044715 * x * x * x);
  let e = exp(clamp(-2.0 * u, V(-80.0), V(80.0)));
  let s = 1.0 / (1.0 + e);
  return s + 2.0 * x * s * (e * s) * S2PI * (1.0 + 3.0 * 0.044715 * x * x);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  d[i] = st(ld(d[i]) * gelu_grad(ld(inp[i])));
}
