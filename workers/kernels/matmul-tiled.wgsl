// out (M, N) = [out +] opA (M, K) @ opB (K, N) [+ bias (N)], tiled with vec4 loads (bench/kernels v4).
// Workgroups of 16x4 invocations cover 16 rows x 64 columns (best of the sweep's shapes).
// Each invocation computes a 4x4 output tile (rows r..r+3, columns c..c+3) and consumes K four
// at a time: it loads the 4x4 blocks of opA and opB as four vec4 each, along whichever
// dimension is contiguous in memory, and turns them into Ar (Ar[i] = row i of the opA block)
// and Bc (Bc[j] = column j of the opB block); transposes of a 4x4 block cost nothing on SIMD
// lanes. Then row i of the tile += Ar[i] * Bc (Ar[i] . Bc[j] for each j).
// One entry point per layout (nn, nt, tn, tt: opA / opB transposed or not).
// Requires K % 4 == 0, M % 4 == 0 when a is transposed, N % 4 == 0 when b is not; the launcher
// falls back to matmul.wgsl otherwise. Loads clamp rows/columns into range; stores are guarded.
// Not a width of matmul.wgsl: its loads follow each operand's contiguous dimension (K, M or N
// by layout), so it has one entry point per layout where matmul.wgsl has strides; the loads are
// vec4 at any prelude width (S4 and ld4, source.ts). The prelude's width is the epilogue's (matmul-store.wgsl).
struct Params {
  M: u32, N: u32, K: u32, flags: u32, // flags: 1 = accumulate into out, 2 = add bias
}
@group(0) @binding(1) var<storage, read_write> a: array<S4>;  // (M, K), or (K, M) when transA
@group(0) @binding(2) var<storage, read_write> b: array<S4>;  // (K, N), or (N, K) when transB
@group(0) @binding(4) var<uniform> p: Params;
// out (binding 0), bias (binding 3) and store_tile come from matmul-store.wgsl, which the
// launcher appends.

// a (M, K): vec4 index of row m, k-quad q is m * K4 + q
// a (K, M) (transA): vec4 index of row k, m-quad is k * M4 + m / 4
// b (K, N): vec4 index of row k, n-quad is k * N4 + n / 4
// b (N, K) (transB): vec4 index of row n, k-quad q is n * K4 + q

@compute @workgroup_size(16, 4)
fn nn(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let r = (wg.y * 4u + l.y) * 4u;
  let c = (wg.x * 16u + l.x) * 4u;
  if (r >= p.M || c >= p.N) { return; }
  let K4 = p.K / 4u;
  let N4 = p.N / 4u;
  let pa0 = min(r, p.M - 1u) * K4;
  let pa1 = min(r + 1u, p.M - 1u) * K4;
  let pa2 = min(r + 2u, p.M - 1u) * K4;
  let pa3 = min(r + 3u, p.M - 1u) * K4;
  var pb = c / 4u;
  var c0 = vec4f(0.0); var c1 = vec4f(0.0); var c2 = vec4f(0.0); var c3 = vec4f(0.0);
  for (var q = 0u; q < K4; q++) {
    let Bc = transpose(mat4x4f(ld4(b[pb]), ld4(b[pb + N4]), ld4(b[pb + 2u * N4]), ld4(b[pb + 3u * N4])));
    pb += 4u * N4;
    c0 += ld4(a[pa0 + q]) * Bc;
    c1 += ld4(a[pa1 + q]) * Bc;
    c2 += ld4(a[pa2 + q]) * Bc;
    c3 += ld4(a[pa3 + q]) * Bc;
  }
  store_tile(r, c, c0, c1, c2, c3);
}

@compute @workgroup_size(16, 4)
fn nt(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let r = (wg.y * 4u + l.y) * 4u;
  let c = (wg.x * 16u + l.x) * 4u;
  if (r >= p.M || c >= p.N) { return; }
  let K4 = p.K / 4u;
  let pa0 = min(r, p.M - 1u) * K4;
  let pa1 = min(r + 1u, p.M - 1u) * K4;
  let pa2 = min(r + 2u, p.M - 1u) * K4;
  let pa3 = min(r + 3u, p.M - 1u) * K4;
  let pb0 = min(c, p.N - 1u) * K4;
  let pb1 = min(c + 1u, p.N - 1u) * K4;
  let pb2 = min(c + 2u, p.N - 1u) * K4;
  let pb3 = min(c + 3u, p.N - 1u) * K4;
  var c0 = vec4f(0.0); var c1 = vec4f(0.0); var c2 = vec4f(0.0); var c3 = vec4f(0.0);
  for (var q = 0u; q < K4; q++) {
    let Bc = mat4x4f(ld4(b[pb0 + q]), ld4(b[pb1 + q]), ld4(b[pb2 + q]), ld4(b[pb3 + q]));
    c0 += ld4(a[pa0 + q]) * Bc;
    c1 += ld4(a[pa1 + q]) * Bc;
    c2 += ld4(a[pa2 + q]) * Bc;
    c3 += ld4(a[pa3 + q]) * Bc;
  }
  store_tile(r, c, c0, c1, c2, c3);
}

@compute @workgroup_size(16, 4)
fn tn(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let r = (wg.y * 4u + l.y) * 4u;
  let c = (wg.x * 16u + l.x) * 4u;
  if (r >= p.M || c >= p.N) { return; }
  let K4 = p.K / 4u;
  let M4 = p.M / 4u;
  let N4 = p.N / 4u;
  var pa = r / 4u;
  var pb = c / 4u;
  var c0 = vec4f(0.0); var c1 = vec4f(0.0); var c2 = vec4f(0.0); var c3 = vec4f(0.0);
  for (var q = 0u; q < K4; q++) {
    let Ar = transpose(mat4x4f(ld4(a[pa]), ld4(a[pa + M4]), ld4(a[pa + 2u * M4]), ld4(a[pa + 3u * M4])));
    let Bc = transpose(mat4x4f(ld4(b[pb]), ld4(b[pb + N4]), ld4(b[pb + 2u * N4]), ld4(b[pb + 3u * N4])));
    pa += 4u * M4;
    pb += 4u * N4;
    c0 += Ar[0] * Bc;
    c1 += Ar[1] * Bc;
    c2 += Ar[2] * Bc;
    c3 += Ar[3] * Bc;
  }
  store_tile(r, c, c0, c1, c2, c3);
}

@compute @workgroup_size(16, 4)
fn tt(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let r = (wg.y * 4u + l.y) * 4u;
  let c = (wg.x * 16u + l.x) * 4u;
  if (r >= p.M || c >= p.N) { return; }
  let K4 = p.K / 4u;
  let M4 = p.M / 4u;
  var pa = r / 4u;
  let pb0 = min(c, p.N - 1u) * K4;
  let pb1 = min(c + 1u, p.N - 1u) * K4;
  let pb2 = min(c + 2u, p.N - 1u) * K4;
  let pb3 = min(c + 3u, p.N - 1u) * K4;
  var c0 = vec4f(0.0); var c1 = vec4f(0.0); var c2 = vec4f(0.0); var c3 = vec4f(0.0);
  for (var q = 0u; q < K4; q++) {
    let Ar = transpose(mat4x4f(ld4(a[pa]), ld4(a[pa + M4]), ld4(a[pa + 2u * M4]), ld4(a[pa + 3u * M4])));
    let Bc = mat4x4f(ld4(b[pb0 + q]), ld4(b[pb1 + q]), ld4(b[pb2 + q]), ld4(b[pb3 + q]));
    pa += 4u * M4;
    c0 += Ar[0] * Bc;
    c1 += Ar[1] * Bc;
    c2 += Ar[2] * Bc;
    c3 += Ar[3] * Bc;
  }
  store_tile(r, c, c0, c1, c2, c3);
}
