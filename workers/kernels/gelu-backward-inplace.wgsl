// GELU backward in place: d (n) holds dout on entry and dinp = dout * gelu'(inp) on exit.
// (gelu-backward.wgsl with dinp and dout in one binding: WebGPU refuses the same range twice.)
struct Params { n: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> d: array<f32>;   // (n)
@group(0) @binding(1) var<storage, read_write> inp: array<f32>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

const S2PI = 0.7978845608028654;

// s = 0.5 (1 + tanh u) = 1 / (1 + e), e = exp(-2u); 1 - tanh^2 u = 4 s (1 - s) = 4 s^2 e: no
// cancellation for negative x (see gelu.wgsl).
fn gelu_grad(x: f32) -> f32 {
  let u = S2PI * (x + 0.044715 * x * x * x);
  let e = exp(clamp(-2.0 * u, -80.0, 80.0));
  let s = 1.0 / (1.0 + e);
  return s + 2.0 * x * s * (e * s) * S2PI * (1.0 + 3.0 * 0.044715 * x * x);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n) { return; }
  let g = gelu_grad(inp[i]);
  d[i] = d[i] * g;
}
