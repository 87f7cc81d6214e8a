// Attention backward, pass 1: gradient of the pre-softmax scores, one invocation per row
// (b, h, t), rows of dout and v read W elements at a time (prelude: source.ts; hs % W == 0),
// four keys per step (one dout load serves four dot products):
//   datt[t2]    = dout[b, t, h, :] . v[b, t2, h, :]                       (t2 <= t)
//   dpreatt[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j])            (t2 <= t; t2 > t never read)
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dpreatt: array<f32>; // (B, NH, T, T) workspace
@group(0) @binding(1) var<storage, read_write> dout: array<S>;      // (B, T, C)
@group(0) @binding(2) var<storage, read_write> qkv: array<S>;       // (B, T, 3C)
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
  let CW = p.C / W;
  let C3 = 3u * CW;
  let hsW = p.hs / W;
  let o0 = (b * p.T + t) * CW + h * hsW;       // dout of (b, t, h)
  let v0 = b * p.T * C3 + 2u * CW + h * hsW;   // v of (b, 0, h)
  let a0 = row * p.T;
  var s = 0.0;
  for (var t2 = 0u; t2 <= t; t2 += 4u) {
    let va = v0 + t2 * C3;
    let vb = v0 + min(t2 + 1u, t) * C3;
    let vc = v0 + min(t2 + 2u, t) * C3;
    let vd = v0 + min(t2 + 3u, t) * C3;
    var da = vec4f(0.0);
    for (var d = 0u; d < hsW; d++) {
      let g = ld(dout[o0 + d]);
      da += vec4f(vdot(g, ld(qkv[va + d])), vdot(g, ld(qkv[vb + d])), vdot(g, ld(qkv[vc + d])), vdot(g, ld(qkv[vd + d])));
    }
    dpreatt[a0 + t2] = da.x;
    s += att[a0 + t2] * da.x;
    if (t2 + 1u <= t) { dpreatt[a0 + t2 + 1u] = da.y; s += att[a0 + t2 + 1u] * da.y; }
    if (t2 + 2u <= t) { dpreatt[a0 + t2 + 2u] = da.z; s += att[a0 + t2 + 2u] * da.z; }
    if (t2 + 3u <= t) { dpreatt[a0 + t2 + 3u] = da.w; s += att[a0 + t2 + 3u] * da.w; }
  }
  for (var t2 = 0u; t2 <= t; t2++) {
    dpreatt[a0 + t2] = att[a0 + t2] * (dpreatt[a0 + t2] - s);
  }
}
