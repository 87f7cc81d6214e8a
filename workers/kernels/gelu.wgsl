// GELU, tanh approximation (PyTorch GELU(approximate='tanh')), W elements per invocation:
//   out = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
struct Params { nW: u32, _a: u32, _b: u32, _c: u32 } // nW = n / W
@group(0) @binding(0) var<storage, read_write> out: array<S>; // (n)
@group(0) @binding(1) var<storage, read_write> inp: array<S>; // (n)
@group(0) @binding(2) var<uniform> p: Params;

const S2PI = 0.7978845608028654; // sqrt(2/pi)

// 0.5 (1 + tanh u) is the sigmoid of 2u: x / (1 + exp(-2u)) keeps full relative precision for
// negative x, where 1 + tanh u cancels (and tanh itself may give NaN for large |u| on some
// drivers). The clamp keeps exp finite.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  let x = ld(inp[i]);
  let u = S2PI * (x + 0.044715 * x * x * x);
  out[i] = st(x / (1.0 + exp(clamp(-2.0 * u, V(-80.0), V(80.0)))));
}
