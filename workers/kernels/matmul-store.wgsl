// Epilogue of matmul.wgsl and matmul-tiled.wgsl: bias, accumulate and store one 4x4 output
// tile (rows r..r+3, columns c..c+3), W columns per access (prelude: source.ts). Width 4 needs
// N % 4 == 0 and 16-byte aligned out and bias (a quarter of the storage accesses, each of
// which costs dearly on SwiftShader); width 1 serves any N. Bias and accumulate are applied
// as whole vec4s, with no per-element loop or dynamic vector index (both are slow on
// SIMD-emulating drivers): the lane offsets below are literals, so the prelude's quad and lanes
// fold away, as do the width-4 calls for lanes 1..3.
@group(0) @binding(0) var<storage, read_write> out: array<S>;  // (M, N)
@group(0) @binding(3) var<storage, read_write> bias: array<S>; // (N); a dummy without bias

fn store_tile(r: u32, c: u32, c0: vec4f, c1: vec4f, c2: vec4f, c3: vec4f) {
  var t0 = c0; var t1 = c1; var t2 = c2; var t3 = c3;
  if ((p.flags & 2u) != 0u) {
    // columns past N are clamped into range; their stores are dropped
    let mN = p.N - 1u;
    let bv = quad(ld(bias[c / W]), ld(bias[min(c + 1u, mN) / W]), ld(bias[min(c + 2u, mN) / W]), ld(bias[min(c + 3u, mN) / W]));
    t0 += bv; t1 += bv; t2 += bv; t3 += bv;
  }
  store_row(r, c, t0);
  if (r + 1u >= p.M) { return; }
  store_row(r + 1u, c, t1);
  if (r + 2u >= p.M) { return; }
  store_row(r + 2u, c, t2);
  if (r + 3u >= p.M) { return; }
  store_row(r + 3u, c, t3);
}

fn store_row(row: u32, c: u32, t: vec4f) {
  store_lanes(row, c, 0u, t);
  store_lanes(row, c, 1u, t);
  store_lanes(row, c, 2u, t);
  store_lanes(row, c, 3u, t);
}

// lanes j .. j + W - 1 of t into columns c + j .. (j % W == 0: at width 4 only j = 0 stores)
fn store_lanes(row: u32, c: u32, j: u32, t: vec4f) {
  if (j % W != 0u || c + j >= p.N) { return; }
  let o = (row * p.N + c + j) / W;
  var x = lanes(t, j);
  if ((p.flags & 1u) != 0u) { x += ld(out[o]); }
  out[o] = st(x);
}
