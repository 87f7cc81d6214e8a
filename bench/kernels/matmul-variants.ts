// Numbered matmul variants for the sweep (llm.c's dev/cuda habit): each is a WGSL source for
// out (M, N) = a (M, K) @ b (K, N), all row-major, with the binding layout of
// workers/kernels/matmul.wgsl (out, a, b, bias, params). Only the winner moves into
// workers/kernels. Variants that load vec4 need K % 4 == 0 and N % 4 == 0.
//
// SwiftShader runs 4 invocations per SIMD lane group (one x86 SSE register per scalar of 4
// invocations), every storage load with per-invocation addresses is a gather with a bounds
// check, and workgroup barriers are coroutine switches. So what matters there is the number of
// storage access instructions per FMA, not coalescing or shared memory.
//
// Findings (SwiftShader, 2 cores shared with other jobs; GFLOP per 2 CPU-seconds of this process):
// - v1 scalar 4x4: ~1.1-1.4. v2 vec4 4x4: ~2.4 (same gathers, a quarter of the address/bounds
//   work). v4 = workers/kernels/matmul-tiled.wgsl (v2 for all four layouts, mat4x4 block form,
//   16x4 workgroups): ~2.0-2.5 at 512-1024, ~1.5-2.2 at the tiny model's K = 64 shapes.
// - Bigger register tiles (4x8, 8x4, 8x8) and 2-4x unrolled K loops: 2-5x slower (Subzero
//   spills); shared-memory tiles (v3): ~3x slower (barriers); split-K over the 4 lanes of a
//   subgroup with one barrier at the end: 2-8x slower; operands packed into 4x4 blocks
//   (one mat4x4 load each): +10-20%, not worth two packing passes per matmul.
// - A wide row-major b (N >= 512) read down its columns walks a page per row: transposing it
//   into a workspace and streaming b^T (transpose.wgsl) takes NN at 1024 from ~1.5 to ~2.5.
// - Robustness (Dawn's index clamping) costs ~15%; kept.
// - Epilogue: a per-element loop with a dynamic vector index cost ~30% at K = 64; the engine
//   stores whole vec4s.

export interface Variant {
  id: string;
  note: string;
  /** WGSL source */
  code: string;
  /** workgroups for M x N */
  grid(M: number, N: number): [number, number];
  /** the shapes it supports */
  supports(M: number, N: number, K: number): boolean;
  /** params block: [M, N, K, flags, ...] */
  params(M: number, N: number, K: number): number[];
}

const header = (aType: string, bType: string) => `
struct Params { M: u32, N: u32, K: u32, flags: u32, sam: u32, sak: u32, sbk: u32, sbn: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> a: array<${aType}>;
@group(0) @binding(2) var<storage, read_write> b: array<${bType}>;
@group(0) @binding(3) var<storage, read_write> bias: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;
fn store(row: u32, col: u32, v: f32) {
  if (row < p.M && col < p.N) {
    let i = row * p.N + col;
    var x = v;
    if ((p.flags & 2u) != 0u) { x += bias[col]; }
    if ((p.flags & 1u) != 0u) { x += out[i]; }
    out[i] = x;
  }
}
`;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** v1: scalar strided loads, TM x TN register tile (the first committed kernel is v1 4x4 8x8). */
function scalarVariant(TM: number, TN: number, WX: number, WY: number): Variant {
  const rows = range(TM);
  const cols = range(TN);
  const code = `${header('f32', 'f32')}
@compute @workgroup_size(${WX}, ${WY})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row0 = (wg.y * ${WY}u + l.y) * ${TM}u;
  let col0 = (wg.x * ${WX}u + l.x) * ${TN}u;
  if (row0 >= p.M || col0 >= p.N) { return; }
${rows.map((i) => `  var pa${i} = min(row0 + ${i}u, p.M - 1u) * p.sam;`).join('\n')}
${cols.map((j) => `  var pb${j} = min(col0 + ${j}u, p.N - 1u) * p.sbn;`).join('\n')}
${rows.flatMap((i) => cols.map((j) => `  var c${i}_${j} = 0.0;`)).join('\n')}
  for (var k = 0u; k < p.K; k++) {
${rows.map((i) => `    let a${i} = a[pa${i}]; pa${i} += p.sak;`).join('\n')}
${cols.map((j) => `    let b${j} = b[pb${j}]; pb${j} += p.sbk;`).join('\n')}
${rows.flatMap((i) => cols.map((j) => `    c${i}_${j} += a${i} * b${j};`)).join('\n')}
  }
${rows.flatMap((i) => cols.map((j) => `  store(row0 + ${i}u, col0 + ${j}u, c${i}_${j});`)).join('\n')}
}`;
  return {
    id: `v1-scalar-${TM}x${TN}-wg${WX}x${WY}`,
    note: 'scalar strided loads',
    code,
    grid: (M, N) => [Math.ceil(N / (TN * WX)), Math.ceil(M / (TM * WY))],
    supports: () => true,
    params: (M, N, K) => [M, N, K, 0, K, 1, N, 1],
  };
}

/**
 * v2: vec4 loads along K for a and along N for b (NN layout); each invocation keeps a TM x TN
 * tile (TN a multiple of 4) as TM * TN/4 vec4 accumulators and consumes K four at a time.
 */
function vec4Variant(TM: number, TN: number, WX: number, WY: number, U = 1): Variant {
  const rows = range(TM);
  const cq = range(TN / 4);
  const code = `${header('vec4f', 'vec4f')}
@compute @workgroup_size(${WX}, ${WY})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row0 = (wg.y * ${WY}u + l.y) * ${TM}u;
  let col0 = (wg.x * ${WX}u + l.x) * ${TN}u;
  if (row0 >= p.M || col0 >= p.N) { return; }
  let K4 = p.K / 4u;
  let N4 = p.N / 4u;
${rows.map((i) => `  var pa${i} = min(row0 + ${i}u, p.M - 1u) * K4;`).join('\n')}
${cq.map((j) => `  var pb${j} = min(col0 / 4u + ${j}u, N4 - 1u);`).join('\n')}
${rows.flatMap((i) => cq.map((j) => `  var c${i}_${j} = vec4f(0.0);`)).join('\n')}
  for (var k = 0u; k < K4; k += ${U}u) {
${range(U)
  .map(
    (u) => `${rows.map((i) => `    let a${i}_${u} = a[pa${i} + k + ${u}u];`).join('\n')}
${range(4)
  .map(
    (kk) => `${cq.map((j) => `    let b${u}_${kk}_${j} = b[pb${j}];`).join('\n')}
${rows.flatMap((i) => cq.map((j) => `    c${i}_${j} += a${i}_${u}.${'xyzw'[kk]} * b${u}_${kk}_${j};`)).join('\n')}
${cq.map((j) => `    pb${j} += N4;`).join('\n')}`,
  )
  .join('\n')}`,
  )
  .join('\n')}
  }
${rows.flatMap((i) => cq.flatMap((j) => range(4).map((e) => `  store(row0 + ${i}u, col0 + ${4 * j + e}u, c${i}_${j}.${'xyzw'[e]});`))).join('\n')}
}`;
  return {
    id: `v2-vec4-${TM}x${TN}-wg${WX}x${WY}${U > 1 ? `-u${U}` : ''}`,
    note: 'vec4 loads (a along K, b along N)',
    code,
    grid: (M, N) => [Math.ceil(N / (TN * WX)), Math.ceil(M / (TM * WY))],
    supports: (_M, N, K) => N % 4 === 0 && K % (4 * U) === 0,
    params: (M, N, K) => [M, N, K, 0, K, 1, N, 1],
  };
}

/**
 * v3: shared-memory tiles (classic): the workgroup stages a BM x BK tile of a and BK x BN of b
 * in workgroup memory (two barriers per BK step), each invocation a TM x TN register tile.
 */
function sharedVariant(TM: number, TN: number, WX: number, WY: number, BK: number): Variant {
  const BM = TM * WY;
  const BN = TN * WX;
  const nThreads = WX * WY;
  const rows = range(TM);
  const cols = range(TN);
  const code = `${header('f32', 'f32')}
var<workgroup> As: array<f32, ${BM * BK}>;
var<workgroup> Bs: array<f32, ${BK * BN}>;
@compute @workgroup_size(${WX}, ${WY})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u, @builtin(local_invocation_index) li: u32) {
  let bm0 = wg.y * ${BM}u;
  let bn0 = wg.x * ${BN}u;
${rows.flatMap((i) => cols.map((j) => `  var c${i}_${j} = 0.0;`)).join('\n')}
  for (var k0 = 0u; k0 < p.K; k0 += ${BK}u) {
    for (var e = li; e < ${BM * BK}u; e += ${nThreads}u) {
      let r = e / ${BK}u; let kk = e % ${BK}u;
      let gr = min(bm0 + r, p.M - 1u); let gk = min(k0 + kk, p.K - 1u);
      As[e] = select(0.0, a[gr * p.K + gk], k0 + kk < p.K);
    }
    for (var e = li; e < ${BK * BN}u; e += ${nThreads}u) {
      let kk = e / ${BN}u; let c = e % ${BN}u;
      let gc = min(bn0 + c, p.N - 1u); let gk = min(k0 + kk, p.K - 1u);
      Bs[e] = select(0.0, b[gk * p.N + gc], k0 + kk < p.K);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${BK}u; kk++) {
${rows.map((i) => `      let a${i} = As[(l.y * ${TM}u + ${i}u) * ${BK}u + kk];`).join('\n')}
${cols.map((j) => `      let b${j} = Bs[kk * ${BN}u + l.x * ${TN}u + ${j}u];`).join('\n')}
${rows.flatMap((i) => cols.map((j) => `      c${i}_${j} += a${i} * b${j};`)).join('\n')}
    }
    workgroupBarrier();
  }
  let row0 = bm0 + l.y * ${TM}u;
  let col0 = bn0 + l.x * ${TN}u;
${rows.flatMap((i) => cols.map((j) => `  store(row0 + ${i}u, col0 + ${j}u, c${i}_${j});`)).join('\n')}
}`;
  return {
    id: `v3-shared-${TM}x${TN}-wg${WX}x${WY}-bk${BK}`,
    note: 'shared-memory tiles, 2 barriers per K step',
    code,
    grid: (M, N) => [Math.ceil(N / BN), Math.ceil(M / BM)],
    supports: () => true,
    params: (M, N, K) => [M, N, K, 0, K, 1, N, 1],
  };
}

export const VARIANTS: Variant[] = [
  vec4Variant(4, 4, 8, 8, 2),
  vec4Variant(4, 4, 8, 8, 4),
  vec4Variant(4, 4, 2, 2),
  vec4Variant(4, 4, 64, 1),
  vec4Variant(4, 4, 4, 16),
  scalarVariant(4, 4, 8, 8),
  scalarVariant(4, 4, 4, 4),
  scalarVariant(2, 4, 8, 8),
  vec4Variant(4, 4, 8, 8),
  vec4Variant(4, 4, 4, 4),
  vec4Variant(4, 4, 16, 4),
  vec4Variant(2, 4, 8, 8),
  vec4Variant(4, 8, 8, 8),
  vec4Variant(8, 4, 8, 8),
  vec4Variant(8, 8, 4, 4),
  vec4Variant(4, 8, 4, 4),
  sharedVariant(4, 4, 8, 8, 16),
];
