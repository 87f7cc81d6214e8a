// Matrix multiply for every linear layer, forward and backward:
//   out (M, N) = [out +] opA (M, K) @ opB (K, N) [+ bias (N) broadcast over rows]
// a is stored (M, K), or (K, M) when transA; b is stored (K, N), or (N, K) when transB
// (a PyTorch Linear weight (OC, C) is used with transB). Kernels (see bench/kernels/matmul-sweep.ts):
// matmul-tiled.wgsl (vec4 loads, one entry point per layout) when K % 4 == 0 and the contiguous
// dimension of each operand is a multiple of 4; matmul.wgsl (scalar strided loads) for every
// other shape. Both end in matmul-store.wgsl, compiled at width 4 (source.ts) when whole output
// rows are vec4s (N % 4 == 0, 16-byte aligned out and bias), else at width 1.
// 16-bit storage (bf16, fp16: a, b, out and bias at one precision, source.ts) takes the tiled
// kernel with a width-4 epilogue only (no transposed copy of b): the shapes must allow both.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { kernel, type Width } from './source.js';
import { assertNoAliasing, assertSize, precisionFor, scratch } from './util.js';

export interface MatmulArgs {
  out: GpuTensor; // (M, N)
  a: GpuTensor; // (M, K), or (K, M) when transA
  b: GpuTensor; // (K, N), or (N, K) when transB
  bias?: GpuTensor | null; // (N)
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  /** out += result instead of out = result */
  accumulate?: boolean;
}

/** Rows and columns of output one workgroup covers (4x4 per invocation): 8x8 invocations for matmul.wgsl, 16x4 for matmul-tiled.wgsl. */
export const MATMUL_TILE = 32;
const VEC4_TILE_M = 16;
const VEC4_TILE_N = 64;
/** Row-major b at least this wide (and this large) is transposed into a workspace first (sweep: NN vs b^T + NT). */
const TRANSPOSE_B_MIN_N = 512;
const TRANSPOSE_B_MIN_KN = 256 * 512;

export function matmul(rt: Runtime, args: MatmulArgs): Dispatch[] {
  const { out, a, b, M, N, K } = args;
  const bias = args.bias ?? null;
  const op = 'matmul';
  assertSize(op, 'out', out, M * N);
  assertSize(op, 'a', a, M * K);
  assertSize(op, 'b', b, K * N);
  if (bias) assertSize(op, 'bias', bias, N);
  const inputs: Record<string, GpuTensor> = { a, b };
  if (bias) inputs.bias = bias;
  assertNoAliasing(op, { out }, inputs);
  if (M === 0 || N === 0) return [];
  const flags = (args.accumulate ? 1 : 0) | (bias ? 2 : 0);
  const gx = Math.ceil(N / MATMUL_TILE);
  const gy = Math.ceil(M / MATMUL_TILE);
  if (gy > Number(rt.limits.maxComputeWorkgroupsPerDimension) || gx > Number(rt.limits.maxComputeWorkgroupsPerDimension)) {
    throw new Error(
      `matmul: ${M}x${N} needs ${gy}x${gx} workgroups; this adapter allows ${rt.limits.maxComputeWorkgroupsPerDimension} per dimension`,
    );
  }
  const label = `matmul ${M}x${N}x${K}${args.transA ? ' tA' : ''}${args.transB ? ' tB' : ''}`;
  // the epilogue's width: vec4 stores when whole rows are vec4s
  const w: Width = N % 4 === 0 && out.byteOffset % 16 === 0 && (!bias || bias.byteOffset % 16 === 0) ? 4 : 1;
  const p = precisionFor(op, { out, ...inputs });
  if (p !== 'fp32' && (w !== 4 || !vec4Fits(args)))
    throw new Error(
      `${label}: ${p} storage needs the vec4 kernel (K % 4 == 0, N % 4 == 0, M % 4 == 0 when a is transposed, 16-byte aligned slices). ---> HINT: pad the dimensions to multiples of 4`,
    );
  if (vec4Fits(args)) {
    const pre: Dispatch[] = [];
    let bIn = b;
    let transB = !!args.transB;
    if (p === 'fp32' && !transB && N >= TRANSPOSE_B_MIN_N && K * N >= TRANSPOSE_B_MIN_KN) {
      // a wide row-major b is read down its columns with a page-sized stride: stream b^T instead
      const bT = scratch(rt, 'matmul.bT', K * N);
      pre.push(
        rt.prepare(`${label} b^T`, kernel(rt, 4, 'transpose'), [bT, b], packParams([K, N, 0, 0]), [Math.ceil(N / 64), Math.ceil(K / 16)]),
      );
      bIn = bT;
      transB = true;
    }
    const entry = `${args.transA ? 't' : 'n'}${transB ? 't' : 'n'}`;
    const pipeline = kernel(rt, w, ['matmul-tiled', 'matmul-store'], entry, p);
    const biasBinding = bias ?? scratch(rt, 'dummy4', 4);
    return [
      ...pre,
      rt.prepare(label, pipeline, [out, a, bIn, biasBinding], packParams([M, N, K, flags]), [
        Math.ceil(N / VEC4_TILE_N),
        Math.ceil(M / VEC4_TILE_M),
      ]),
    ];
  }
  const biasBinding = bias ?? scratch(rt, 'dummy4', 4);
  // (m, k) of opA at a[m * sam + k * sak]; (k, n) of opB at b[k * sbk + n * sbn]
  const [sam, sak] = args.transA ? [1, M] : [K, 1];
  const [sbk, sbn] = args.transB ? [1, K] : [N, 1];
  const params = packParams([M, N, K, flags, sam, sak, sbk, sbn]);
  const pipeline = kernel(rt, w, ['matmul', 'matmul-store']);
  return [rt.prepare(label, pipeline, [out, a, b, biasBinding], params, [gx, gy])];
}

/**
 * matmul-tiled.wgsl loads vec4s along the contiguous dimension of each operand: K for a and
 * for b^T, M for a^T, N for b. Those must be multiples of 4, and the slices 16-byte aligned.
 */
export function vec4Fits({ a, b, M, N, K, transA, transB }: MatmulArgs): boolean {
  if (K % 4 !== 0 || K === 0) return false;
  if (transA && M % 4 !== 0) return false;
  if (!transB && N % 4 !== 0) return false;
  return a.byteOffset % 16 === 0 && b.byteOffset % 16 === 0;
}
