// Attention backward, pass 2: one invocation per (b, h, t, d) writes dq, dk and dv of that
// element of dqkv (overwrite: every element of dqkv is written exactly once).
//   dq[t, d] = scale * sum_{t2 <= t} dpreatt[t, t2] k[t2, d]
//   dk[t, d] = scale * sum_{t1 >= t} dpreatt[t1, t] q[t1, d]
//   dv[t, d] =         sum_{t1 >= t} att[t1, t] dout[t1, d]
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32, _b: u32, _c: u32 }
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;    // (B, T, 3C)
@group(0) @binding(1) var<storage, read_write> dpreatt: array<f32>; // (B, NH, T, T) workspace
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;    // (B, T, C)
@group(0) @binding(3) var<storage, read_write> qkv: array<f32>;     // (B, T, 3C)
@group(0) @binding(4) var<storage, read_write> att: array<f32>;     // (B, NH, T, T)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 64u + li; // ((b * NH + h) * T + t) * hs + d
  if (i >= p.B * p.NH * p.T * p.hs) { return; }
  let d = i % p.hs;
  let row = i / p.hs;
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let C3 = 3u * p.C;
  let base = b * p.T * C3 + h * p.hs + d;      // q of (b, 0, h, d); k at + C, v at + 2C
  let a_bh = bh * p.T * p.T;                   // att[b, h, 0, 0]
  var dq = 0.0;
  var kk = base + p.C;
  var a = a_bh + t * p.T;
  for (var t2 = 0u; t2 <= t; t2++) {
    dq += dpreatt[a + t2] * qkv[kk];
    kk += C3;
  }
  var dk = 0.0;
  var dv = 0.0;
  var qq = base + t * C3;
  var oo = (b * p.T + t) * p.C + h * p.hs + d;
  a = a_bh + t * p.T + t;
  for (var t1 = t; t1 < p.T; t1++) {
    dk += dpreatt[a] * qkv[qq];
    dv += att[a] * dout[oo];
    qq += C3;
    oo += p.C;
    a += p.T;
  }
  let o = base + t * C3;
  dqkv[o] = dq * p.scale;
  dqkv[o + p.C] = dk * p.scale;
  dqkv[o + 2u * p.C] = dv;
}
