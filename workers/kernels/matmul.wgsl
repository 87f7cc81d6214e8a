// out (M, N) = [out +] opA (M, K) @ opB (K, N) [+ bias (N) broadcast over rows]
// One strided kernel serves all four transpose cases: element (m, k) of opA sits at
// a[m * sam + k * sak] and element (k, n) of opB at b[k * sbk + n * sbn], so there is no
// branch in the inner loop. Each invocation computes a 4x4 register tile; edge tiles clamp
// their loads into range and guard only their stores, so any M, N, K works. a and b are read
// one element at a time at any prelude width; the width is the epilogue's (matmul-store.wgsl).
struct Params {
  M: u32, N: u32, K: u32, flags: u32,   // flags: 1 = accumulate into out, 2 = add bias
  sam: u32, sak: u32, sbk: u32, sbn: u32,
}
@group(0) @binding(1) var<storage, read_write> a: array<f32>;    // (M, K), or (K, M) when transA
@group(0) @binding(2) var<storage, read_write> b: array<f32>;    // (K, N), or (N, K) when transB
@group(0) @binding(4) var<uniform> p: Params;
// out (binding 0), bias (binding 3) and store_tile come from matmul-store.wgsl, which the
// launcher appends.

@compute @workgroup_size(8, 8)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row0 = (wg.y * 8u + l.y) * 4u;
  let col0 = (wg.x * 8u + l.x) * 4u;
  if (row0 >= p.M || col0 >= p.N) { return; }
  let mM = p.M - 1u;
  let mN = p.N - 1u;
  var pa0 = min(row0, mM) * p.sam;
  var pa1 = min(row0 + 1u, mM) * p.sam;
  var pa2 = min(row0 + 2u, mM) * p.sam;
  var pa3 = min(row0 + 3u, mM) * p.sam;
  var pb0 = min(col0, mN) * p.sbn;
  var pb1 = min(col0 + 1u, mN) * p.sbn;
  var pb2 = min(col0 + 2u, mN) * p.sbn;
  var pb3 = min(col0 + 3u, mN) * p.sbn;
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var k = 0u; k < p.K; k++) {
    let bv = vec4f(b[pb0], b[pb1], b[pb2], b[pb3]);
    acc0 += a[pa0] * bv;
    acc1 += a[pa1] * bv;
    acc2 += a[pa2] * bv;
    acc3 += a[pa3] * bv;
    pa0 += p.sak; pa1 += p.sak; pa2 += p.sak; pa3 += p.sak;
    pb0 += p.sbk; pb1 += p.sbk; pb2 += p.sbk; pb3 += p.sbk;
  }
  store_tile(row0, col0, acc0, acc1, acc2, acc3);
}
