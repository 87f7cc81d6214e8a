// Attention backward, pass 1: gradient of the pre-softmax scores, one invocation per row (b, h, t).
//   datt[t2]    = dout[b, t, h, :] . v[b, t2, h, :]                       (t2 <= t)
//   dpreatt[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j])            (t2 <= t; t2 > t never read)
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dpreatt: array<f32>; // (B, NH, T, T) workspace
@group(0) @binding(1) var<storage, read_write> dout: array<f32>;    // (B, T, C)
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;     // (B, T, 3C)
@group(0) @binding(3) var<storage, read_write> att: array<f32>;     // (B, NH, T, T)
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li;
  if (row >= p.B * p.NH * p.T) { return; }
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let C3 = 3u * p.C;
  let o0 = (b * p.T + t) * p.C + h * p.hs;     // dout of (b, t, h)
  let v0 = b * p.T * C3 + 2u * p.C + h * p.hs; // v of (b, 0, h)
  let a0 = row * p.T;
  var s = 0.0;
  for (var t2 = 0u; t2 <= t; t2++) {
    let vv = v0 + t2 * C3;
    var da = 0.0;
    for (var d = 0u; d < p.hs; d++) { da += dout[o0 + d] * qkv[vv + d]; }
    dpreatt[a0 + t2] = da;
    s += att[a0 + t2] * da;
  }
  for (var t2 = 0u; t2 <= t; t2++) {
    dpreatt[a0 + t2] = att[a0 + t2] * (dpreatt[a0 + t2] - s);
  }
}
