// Attention backward, pass 2, vec4 loads (hs % 4 == 0): one invocation per (b, h, t) and pair of
// column quads writes eight columns of dq, dk and dv (the dpreatt/att loads serve both quads;
// overwrite: every element of dqkv written exactly once):
//   dq[t, d] = scale * sum_{t2 <= t} dpreatt[t, t2] k[t2, d]
//   dk[t, d] = scale * sum_{t1 >= t} dpreatt[t1, t] q[t1, d]
//   dv[t, d] =         sum_{t1 >= t} att[t1, t] dout[t1, d]
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dqkv: array<vec4f>;  // (B, T, 3C)
@group(0) @binding(1) var<storage, read_write> dpreatt: array<f32>; // (B, NH, T, T) workspace
@group(0) @binding(2) var<storage, read_write> dout: array<vec4f>;  // (B, T, C)
@group(0) @binding(3) var<storage, read_write> qkv: array<vec4f>;   // (B, T, 3C)
@group(0) @binding(4) var<storage, read_write> att: array<f32>;     // (B, NH, T, T)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let hs4 = p.hs / 4u;
  let hp = (hs4 + 1u) / 2u;                 // column-quad pairs per head
  let i = (wg.x + wg.y * nwg.x) * 64u + li; // ((b * NH + h) * T + t) * hp + pair
  if (i >= p.B * p.NH * p.T * hp) { return; }
  let d = (i % hp) * 2u;                    // this invocation's quads: d and e (e == d when hs4 is odd at the end)
  let e = min(d + 1u, hs4 - 1u);
  let row = i / hp;
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let C4 = p.C / 4u;
  let C3 = 3u * C4;
  let base = b * p.T * C3 + h * hs4;           // q of (b, 0, h, quad 0); k at + C4, v at + 2 C4
  let a_bh = bh * p.T * p.T;
  var dq0 = vec4f(0.0);
  var dq1 = vec4f(0.0);
  var kk = base + C4;
  let arow = a_bh + t * p.T;
  for (var t2 = 0u; t2 <= t; t2++) {
    let w = dpreatt[arow + t2];
    dq0 += w * qkv[kk + d];
    dq1 += w * qkv[kk + e];
    kk += C3;
  }
  var dk0 = vec4f(0.0);
  var dk1 = vec4f(0.0);
  var dv0 = vec4f(0.0);
  var dv1 = vec4f(0.0);
  var qq = base + t * C3;
  var oo = (b * p.T + t) * C4 + h * hs4;
  var a = a_bh + t * p.T + t;
  for (var t1 = t; t1 < p.T; t1++) {
    let w = dpreatt[a];
    let s = att[a];
    dk0 += w * qkv[qq + d];
    dk1 += w * qkv[qq + e];
    dv0 += s * dout[oo + d];
    dv1 += s * dout[oo + e];
    qq += C3;
    oo += C4;
    a += p.T;
  }
  let o = base + t * C3;
  dqkv[o + d] = dq0 * p.scale;
  dqkv[o + C4 + d] = dk0 * p.scale;
  dqkv[o + 2u * C4 + d] = dv0;
  if (e != d) {
    dqkv[o + e] = dq1 * p.scale;
    dqkv[o + C4 + e] = dk1 * p.scale;
    dqkv[o + 2u * C4 + e] = dv1;
  }
}
