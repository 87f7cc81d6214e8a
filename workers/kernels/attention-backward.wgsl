// Attention backward, pass 2: one invocation per (b, h, t) and pair of column groups writes
// 2 W columns of dq, dk and dv (prelude: source.ts; hs % W == 0; the dpreatt/att loads serve
// both groups; overwrite: every element of dqkv written exactly once):
//   dq[t, d] = scale * sum_{t2 <= t} dpreatt[t, t2] k[t2, d]
//   dk[t, d] = scale * sum_{t1 >= t} dpreatt[t1, t] q[t1, d]
//   dv[t, d] =         sum_{t1 >= t} att[t1, t] dout[t1, d]
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dqkv: array<S>;      // (B, T, 3C)
@group(0) @binding(1) var<storage, read_write> dpreatt: array<f32>; // (B, NH, T, T) workspace
@group(0) @binding(2) var<storage, read_write> dout: array<S>;      // (B, T, C)
@group(0) @binding(3) var<storage, read_write> qkv: array<S>;       // (B, T, 3C)
@group(0) @binding(4) var<storage, read_write> att: array<f32>;     // (B, NH, T, T)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let hsW = p.hs / W;
  let hp = (hsW + 1u) / 2u;                 // column-group pairs per head
  let i = (wg.x + wg.y * nwg.x) * 64u + li; // ((b * NH + h) * T + t) * hp + pair
  if (i >= p.B * p.NH * p.T * hp) { return; }
  let d = (i % hp) * 2u;                    // this invocation's groups: d and e (e == d when hsW is odd at the end)
  let e = min(d + 1u, hsW - 1u);
  let row = i / hp;
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let CW = p.C / W;
  let C3 = 3u * CW;
  let base = b * p.T * C3 + h * hsW;           // q of (b, 0, h, group 0); k at + CW, v at + 2 CW
  let a_bh = bh * p.T * p.T;
  var dq0 = V(0.0);
  var dq1 = V(0.0);
  var kk = base + CW;
  let arow = a_bh + t * p.T;
  for (var t2 = 0u; t2 <= t; t2++) {
    let w = dpreatt[arow + t2];
    dq0 += w * ld(qkv[kk + d]);
    dq1 += w * ld(qkv[kk + e]);
    kk += C3;
  }
  var dk0 = V(0.0);
  var dk1 = V(0.0);
  var dv0 = V(0.0);
  var dv1 = V(0.0);
  var qq = base + t * C3;
  var oo = (b * p.T + t) * CW + h * hsW;
  var a = a_bh + t * p.T + t;
  for (var t1 = t; t1 < p.T; t1++) {
    let w = dpreatt[a];
    let s = att[a];
    dk0 += w * ld(qkv[qq + d]);
    dk1 += w * ld(qkv[qq + e]);
    dv0 += s * ld(dout[oo + d]);
    dv1 += s * ld(dout[oo + e]);
    qq += C3;
    oo += CW;
    a += p.T;
  }
  let o = base + t * C3;
  dqkv[o + d] = st(dq0 * p.scale);
  dqkv[o + CW + d] = st(dk0 * p.scale);
  dqkv[o + 2u * CW + d] = st(dv0);
  if (e != d) {
    dqkv[o + e] = st(dq1 * p.scale);
    dqkv[o + CW + e] = st(dk1 * p.scale);
    dqkv[o + 2u * CW + e] = st(dv1);
  }
}
