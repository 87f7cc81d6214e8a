// Epilogue of matmul-vec4.wgsl when N % 4 == 0: out and bias as vec4 (a quarter of the
// storage accesses of matmul-store-f32.wgsl; each access costs dearly on SwiftShader).
@group(0) @binding(0) var<storage, read_write> out: array<vec4f>;  // (M, N)
@group(0) @binding(3) var<storage, read_write> bias: array<vec4f>; // (N); a dummy without bias

fn store_tile(r: u32, c: u32, c0: vec4f, c1: vec4f, c2: vec4f, c3: vec4f) {
  var t0 = c0; var t1 = c1; var t2 = c2; var t3 = c3;
  let N4 = p.N / 4u;
  let cq = c / 4u;
  if ((p.flags & 2u) != 0u) {
    let bv = bias[cq];
    t0 += bv; t1 += bv; t2 += bv; t3 += bv;
  }
  var o = r * N4 + cq;
  if ((p.flags & 1u) != 0u) { t0 += out[o]; }
  out[o] = t0;
  if (r + 1u >= p.M) { return; }
  o += N4;
  if ((p.flags & 1u) != 0u) { t1 += out[o]; }
  out[o] = t1;
  if (r + 2u >= p.M) { return; }
  o += N4;
  if ((p.flags & 1u) != 0u) { t2 += out[o]; }
  out[o] = t2;
  if (r + 3u >= p.M) { return; }
  o += N4;
  if ((p.flags & 1u) != 0u) { t3 += out[o]; }
  out[o] = t3;
}
