// Epilogue of matmul-vec4.wgsl for any N: scalar out and bias.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (M, N)
@group(0) @binding(3) var<storage, read_write> bias: array<f32>; // (N); a 1-element dummy without bias

// Epilogue: bias and accumulate applied as whole vec4s (no per-element loop or dynamic vector
// index: both are slow on SIMD-emulating drivers), then guarded scalar stores (N may be odd).
fn store_tile(r: u32, c: u32, c0: vec4f, c1: vec4f, c2: vec4f, c3: vec4f) {
  var t0 = c0; var t1 = c1; var t2 = c2; var t3 = c3;
  if ((p.flags & 2u) != 0u) {
    let mN = p.N - 1u;
    let bv = vec4f(bias[c], bias[min(c + 1u, mN)], bias[min(c + 2u, mN)], bias[min(c + 3u, mN)]);
    t0 += bv; t1 += bv; t2 += bv; t3 += bv;
  }
  if (r + 3u < p.M && c + 3u < p.N) {
    let o = r * p.N + c;
    if ((p.flags & 1u) != 0u) {
      t0 += vec4f(out[o], out[o + 1u], out[o + 2u], out[o + 3u]);
      t1 += vec4f(out[o + p.N], out[o + p.N + 1u], out[o + p.N + 2u], out[o + p.N + 3u]);
      t2 += vec4f(out[o + 2u * p.N], out[o + 2u * p.N + 1u], out[o + 2u * p.N + 2u], out[o + 2u * p.N + 3u]);
      t3 += vec4f(out[o + 3u * p.N], out[o + 3u * p.N + 1u], out[o + 3u * p.N + 2u], out[o + 3u * p.N + 3u]);
    }
    out[o] = t0.x; out[o + 1u] = t0.y; out[o + 2u] = t0.z; out[o + 3u] = t0.w;
    out[o + p.N] = t1.x; out[o + p.N + 1u] = t1.y; out[o + p.N + 2u] = t1.z; out[o + p.N + 3u] = t1.w;
    out[o + 2u * p.N] = t2.x; out[o + 2u * p.N + 1u] = t2.y; out[o + 2u * p.N + 2u] = t2.z; out[o + 2u * p.N + 3u] = t2.w;
    out[o + 3u * p.N] = t3.x; out[o + 3u * p.N + 1u] = t3.y; out[o + 3u * p.N + 2u] = t3.z; out[o + 3u * p.N + 3u] = t3.w;
    return;
  }
  store_edge(r, c, t0);
  store_edge(r + 1u, c, t1);
  store_edge(r + 2u, c, t2);
  store_edge(r + 3u, c, t3);
}

fn store1(row: u32, col: u32, x: f32) {
  if (row < p.M && col < p.N) {
    let i = row * p.N + col;
    if ((p.flags & 1u) != 0u) { out[i] = out[i] + x; } else { out[i] = x; }
  }
}

fn store_edge(row: u32, c: u32, v: vec4f) {
  store1(row, c, v.x);
  store1(row, c + 1u, v.y);
  store1(row, c + 2u, v.z);
  store1(row, c + 3u, v.w);
}

