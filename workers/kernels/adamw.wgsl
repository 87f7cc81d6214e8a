// AdamW with PyTorch's semantics, W elements per invocation (prelude: source.ts), gradient-norm
// clipping and mixed precision's loss-scale unscaling folded in (no readback of the norm):
//   g = grads * invScale                (grads hold loss-scaled values; invScale = 1 / scale, a power of 2)
//   norm = sqrt(gradSumSq[0]) * invScale (the unscaled global norm; gradSumSq sums the scaled grads)
//   skip the whole step (write nothing) when skipNonFinite and gradSumSq[0] is inf or NaN: one
//     inf/NaN gradient anywhere makes the global sum non-finite, so every invocation agrees
//   g *= min(1, maxGradNorm / (norm + 1e-6))   when maxGradNorm > 0
//   p *= 1 - lr * wd
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),  bc1 = 1 - beta1^t, bc2 = 1 - beta2^t
// grads are read, not written: the clipped gradient only feeds the update.
struct Params {
  nW: u32, beta1: f32, beta2: f32, eps: f32,
  decay: f32,       // 1 - lr * wd
  stepSize: f32,    // lr / bc1
  sqrtBc2: f32,     // sqrt(bc2)
  maxGradNorm: f32, // <= 0: no clipping
  invScale: f32,    // 1 / loss scale (1 without scaling)
  skipNonFinite: u32,
  _a: u32, _b: u32,
}
// params, m and v are the fp32 optimizer state (array<V>); grads are in compute precision (array<S>).
@group(0) @binding(0) var<storage, read_write> params: array<V>;      // (n)
@group(0) @binding(1) var<storage, read_write> grads: array<S>;       // (n)
@group(0) @binding(2) var<storage, read_write> m: array<V>;           // (n)
@group(0) @binding(3) var<storage, read_write> v: array<V>;           // (n)
@group(0) @binding(4) var<storage, read_write> gradSumSq: array<f32>; // (1)
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let i = (wg.x + wg.y * nwg.x) * 256u + li;
  if (i >= p.nW) { return; }
  let sumSq = gradSumSq[0];
  // inf/NaN by the bits: WGSL lets compilers assume finite floats in comparisons
  if (p.skipNonFinite != 0u && (bitcast<u32>(sumSq) & 0x7f800000u) == 0x7f800000u) { return; }
  var g = ld(grads[i]) * p.invScale;
  let norm = sqrt(sumSq) * p.invScale;
  if (p.maxGradNorm > 0.0) { g *= min(1.0, p.maxGradNorm / (norm + 1e-6)); }
  let mi = p.beta1 * m[i] + (1.0 - p.beta1) * g;
  let vi = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  let w = params[i] * p.decay;
  params[i] = w - p.stepSize * mi / (sqrt(vi) / p.sqrtBc2 + p.eps);
}
