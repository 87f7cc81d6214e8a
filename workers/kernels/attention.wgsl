// Causal self-attention forward, one invocation per query row (b, h, t); no barriers.
//   q, k, v of head h: columns h*hs .. (h+1)*hs of the [q (C) | k (C) | v (C)] blocks of qkv
//   att[b, h, t, t2] = softmax_t2<=t(q_t . k_t2 * scale), 0 for t2 > t   (saved for backward)
//   out[b, t, h*hs + d] = sum_t2 att[b, h, t, t2] v[b, t2, h*hs + d]
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>; // (B, T, C)
@group(0) @binding(1) var<storage, read_write> att: array<f32>; // (B, NH, T, T)
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>; // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li; // (b * NH + h) * T + t
  if (row >= p.B * p.NH * p.T) { return; }
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let C3 = 3u * p.C;
  let q0 = (b * p.T + t) * C3 + h * p.hs;     // q of (b, t, h)
  let k0 = b * p.T * C3 + p.C + h * p.hs;      // k of (b, 0, h)
  let v0 = k0 + p.C;                           // v of (b, 0, h)
  let a0 = row * p.T;                          // att[b, h, t, 0]
  var mx = -3.0e38;
  for (var t2 = 0u; t2 <= t; t2++) {
    let kk = k0 + t2 * C3;
    var s = 0.0;
    for (var d = 0u; d < p.hs; d++) { s += qkv[q0 + d] * qkv[kk + d]; }
    s *= p.scale;
    att[a0 + t2] = s;
    mx = max(mx, s);
  }
  var sum = 0.0;
  for (var t2 = 0u; t2 <= t; t2++) {
    let e = exp(att[a0 + t2] - mx);
    att[a0 + t2] = e;
    sum += e;
  }
  let inv = 1.0 / sum;
  for (var t2 = 0u; t2 <= t; t2++) { att[a0 + t2] = att[a0 + t2] * inv; }
  for (var t2 = t + 1u; t2 < p.T; t2++) { att[a0 + t2] = 0.0; }
  let o0 = (b * p.T + t) * p.C + h * p.hs;
  for (var d = 0u; d < p.hs; d++) {
    var o = 0.0;
    var vv = v0 + d;
    for (var t2 = 0u; t2 <= t; t2++) {
      o += att[a0 + t2] * qkv[vv];
      vv += C3;
    }
    out[o0 + d] = o;
  }
}
