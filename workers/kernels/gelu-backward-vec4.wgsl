// GELU backward on vec4s (n % 4 == 0): gelu-backward.wgsl with a quarter of the storage accesses.
struct Params { n4: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dinp: array<vec4f>; // (n)
@group(0) @binding(1) var<storage, read_write> inp: array<vec4f>;  // (n)
@group(0) @binding(2) var<storage, read_write> dout: array<vec4f>; // (n)
@group(0) @binding(3) var<uniform> p: Params;

const S2PI = 0.7978845608028654;

fn gelu_grad(x: vec4f) -> vec4f {
  let u = S2PI * (x + 0.044715 * x * x * x);
  let e = exp(clamp(-2.0 * u, vec4f(-80.0), vec4f(80.0)));
  let s = 1.0 / (1.0 + e);
  return s + 2.0 * x * s * (e * s) * S2PI * (1.0 + 3.0 * 0.044715 * x * x);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.n4) { return; }
  dinp[i] = dout[i] * gelu_grad(inp[i]);
}
