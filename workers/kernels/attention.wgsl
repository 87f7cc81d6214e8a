// Causal self-attention forward, one invocation per query row (b, h, t); no barriers. Rows of
// q, k, v are read W elements at a time (prelude: source.ts; hs % W == 0).
//   q, k, v of head h: columns h*hs .. (h+1)*hs of the [q (C) | k (C) | v (C)] blocks of qkv
//   att[b, h, t, t2] = softmax_t2<=t(q_t . k_t2 * scale), 0 for t2 > t   (saved for backward)
//   out[b, t, h*hs + d] = sum_t2 att[b, h, t, t2] v[b, t2, h*hs + d]
// Scores take four keys per step (one q load serves four dot products); the output takes four
// column groups per step (one att load serves four v loads). Each score and output element
// sums in index order, the same at either width but for the lanes of vdot.
struct Params { B: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<S>;   // (B, T, C)
@group(0) @binding(1) var<storage, read_write> att: array<f32>; // (B, NH, T, T)
@group(0) @binding(2) var<storage, read_write> qkv: array<S>;   // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li; // (b * NH + h) * T + t
  if (row >= p.B * p.NH * p.T) { return; }
  let t = row % p.T;
  let bh = row / p.T;
  let h = bh % p.NH;
  let b = bh / p.NH;
  let CW = p.C / W;                            // row stride of out in S
  let C3 = 3u * CW;                            // row stride of qkv in S
  let hsW = p.hs / W;
  let q0 = (b * p.T + t) * C3 + h * hsW;       // q of (b, t, h)
  let k0 = b * p.T * C3 + CW + h * hsW;        // k of (b, 0, h)
  let v0 = k0 + CW;                            // v of (b, 0, h)
  let a0 = row * p.T;                          // att[b, h, t, 0]
  var mx = -3.0e38;
  for (var t2 = 0u; t2 <= t; t2 += 4u) {
    let ka = k0 + t2 * C3;
    let kb = k0 + min(t2 + 1u, t) * C3;
    let kc = k0 + min(t2 + 2u, t) * C3;
    let kd = k0 + min(t2 + 3u, t) * C3;
    var s = vec4f(0.0);
    for (var d = 0u; d < hsW; d++) {
      let q = ld(qkv[q0 + d]);
      s += vec4f(vdot(q, ld(qkv[ka + d])), vdot(q, ld(qkv[kb + d])), vdot(q, ld(qkv[kc + d])), vdot(q, ld(qkv[kd + d])));
    }
    s *= p.scale;
    att[a0 + t2] = s.x;
    mx = max(mx, s.x);
    if (t2 + 1u <= t) { att[a0 + t2 + 1u] = s.y; mx = max(mx, s.y); }
    if (t2 + 2u <= t) { att[a0 + t2 + 2u] = s.z; mx = max(mx, s.z); }
    if (t2 + 3u <= t) { att[a0 + t2 + 3u] = s.w; mx = max(mx, s.w); }
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
  let o0 = (b * p.T + t) * CW + h * hsW;
  for (var g = 0u; g < hsW; g += 4u) {
    let d1 = min(g + 1u, hsW - 1u);
    let d2 = min(g + 2u, hsW - 1u);
    let d3 = min(g + 3u, hsW - 1u);
    var o0v = V(0.0); var o1v = V(0.0); var o2v = V(0.0); var o3v = V(0.0);
    var vv = v0;
    for (var t2 = 0u; t2 <= t; t2++) {
      let w = att[a0 + t2];
      o0v += w * ld(qkv[vv + g]);
      o1v += w * ld(qkv[vv + d1]);
      o2v += w * ld(qkv[vv + d2]);
      o3v += w * ld(qkv[vv + d3]);
      vv += C3;
    }
    out[o0 + g] = st(o0v);
    if (g + 1u < hsW) { out[o0 + g + 1u] = st(o1v); }
    if (g + 2u < hsW) { out[o0 + g + 2u] = st(o2v); }
    if (g + 3u < hsW) { out[o0 + g + 3u] = st(o3v); }
  }
}
