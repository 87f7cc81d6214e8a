// Matrix multiply for every linear layer, forward and backward:
//   out (M, N) = [out +] opA (M, K) @ opB (K, N) [+ bias (N) broadcast over rows]
// a is stored (M, K), or (K, M) when transA; b is stored (K, N), or (N, K) when transB
// (a PyTorch Linear weight (OC, C) is used with transB). Kernel: matmul.wgsl, the winner of
// bench/kernels/matmul-sweep.ts.
import type { GpuTensor } from '../gpu/allocator.js';
import { type Dispatch, packParams, type Runtime } from '../gpu/runtime.js';
import { assertNoAliasing, assertSize, scratch, wgsl } from './util.js';

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

/** Rows and columns of output one workgroup covers (8x8 invocations, 4x4 each). */
export const MATMUL_TILE = 32;

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
  // (m, k) of opA at a[m * sam + k * sak]; (k, n) of opB at b[k * sbk + n * sbn]
  const [sam, sak] = args.transA ? [1, M] : [K, 1];
  const [sbk, sbn] = args.transB ? [1, K] : [N, 1];
  const params = packParams([M, N, K, flags, sam, sak, sbk, sbn]);
  const pipeline = rt.compile('matmul', wgsl('matmul'));
  const gx = Math.ceil(N / MATMUL_TILE);
  const gy = Math.ceil(M / MATMUL_TILE);
  if (gy > Number(rt.limits.maxComputeWorkgroupsPerDimension) || gx > Number(rt.limits.maxComputeWorkgroupsPerDimension)) {
    throw new Error(`matmul: ${M}x${N} needs ${gy}x${gx} workgroups; this adapter allows ${rt.limits.maxComputeWorkgroupsPerDimension} per dimension`);
  }
  const biasBinding = bias ?? scratch(rt, 'dummy', 1);
  return [rt.prepare(`matmul ${M}x${N}x${K}`, pipeline, [out, a, b, biasBinding], params, [gx, gy])];
}
