// Float64 CPU reference of every kernel in workers/kernels, with the same names prefixed `ref`
// and the same argument objects (Float64Array / Uint32Array instead of GPU tensors). They
// mirror the GPU semantics exactly — which outputs are overwritten and which accumulate — so
// a reference GPT can be composed from them. Shapes use the llm.c letters B, T, C, V, NH, hs.
export type F64 = Float64Array;
export type U32 = Uint32Array;

/** out (M, N) = [out +] opA (M, K) @ opB (K, N) [+ bias (N)]; a (M, K) or (K, M) if transA; b (K, N) or (N, K) if transB */
export function refMatmul(args: {
  out: F64;
  a: F64;
  b: F64;
  bias?: F64 | null;
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  accumulate?: boolean;
}) {
  const { out, a, b, bias, M, N, K, transA, transB, accumulate } = args;
  const row = new Float64Array(N);
  for (let m = 0; m < M; m++) {
    row.fill(0);
    for (let k = 0; k < K; k++) {
      const av = transA ? a[k * M + m] : a[m * K + k];
      if (av === 0) continue;
      if (transB) for (let n = 0; n < N; n++) row[n] += av * b[n * K + k];
      else {
        const o = k * N;
        for (let n = 0; n < N; n++) row[n] += av * b[o + n];
      }
    }
    for (let n = 0; n < N; n++) {
      const v = row[n] + (bias ? bias[n] : 0);
      out[m * N + n] = accumulate ? out[m * N + n] + v : v;
    }
  }
}

/** dbias (N) [+]= column sums of dout (M, N) */
export function refBiasBackward({ dbias, dout, M, N, accumulate }: { dbias: F64; dout: F64; M: number; N: number; accumulate?: boolean }) {
  for (let n = 0; n < N; n++) {
    let s = 0;
    for (let m = 0; m < M; m++) s += dout[m * N + n];
    dbias[n] = accumulate ? dbias[n] + s : s;
  }
}

/** out (B, T, C) = wte[idx[b, t]] + wpe[t] */
export function refEncoderForward({
  out,
  idx,
  wte,
  wpe,
  B,
  T,
  C,
}: {
  out: F64;
  idx: U32;
  wte: F64;
  wpe: F64;
  B: number;
  T: number;
  C: number;
}) {
  for (let bt = 0; bt < B * T; bt++) {
    const t = bt % T;
    for (let c = 0; c < C; c++) out[bt * C + c] = wte[idx[bt] * C + c] + wpe[t * C + c];
  }
}

/** dwte (V, C) += dout scattered by token id; dwpe (maxT, C) += dout summed over B (both accumulate) */
export function refEncoderBackward({
  dwte,
  dwpe,
  dout,
  idx,
  B,
  T,
  C,
}: {
  dwte: F64;
  dwpe: F64;
  dout: F64;
  idx: U32;
  B: number;
  T: number;
  C: number;
  V: number;
}) {
  for (let bt = 0; bt < B * T; bt++) {
    const t = bt % T;
    for (let c = 0; c < C; c++) {
      dwte[idx[bt] * C + c] += dout[bt * C + c];
      dwpe[t * C + c] += dout[bt * C + c];
    }
  }
}

/**
 * One rank's embedding of a vocab-parallel group holding token rows vStart .. vStart + Vl - 1:
 * out (B, T, C) = (own token ? wte[idx - vStart] : 0) + (addPositions ? wpe[t] : 0)
 */
export function refEmbeddingForward(args: {
  out: F64;
  idx: U32;
  wte: F64;
  wpe: F64;
  B: number;
  T: number;
  C: number;
  vStart: number;
  Vl: number;
  addPositions: boolean;
}) {
  const { out, idx, wte, wpe, B, T, C, vStart, Vl, addPositions } = args;
  for (let bt = 0; bt < B * T; bt++) {
    const t = bt % T;
    const own = idx[bt] >= vStart && idx[bt] - vStart < Vl;
    for (let c = 0; c < C; c++) out[bt * C + c] = (own ? wte[(idx[bt] - vStart) * C + c] : 0) + (addPositions ? wpe[t * C + c] : 0);
  }
}

/** That rank's backward: dwte (Vl, C) += dout of its own tokens; dwpe (maxT, C) += dout summed over B (every rank) */
export function refEmbeddingBackward(args: {
  dwte: F64;
  dwpe: F64;
  dout: F64;
  idx: U32;
  B: number;
  T: number;
  C: number;
  vStart: number;
  Vl: number;
}) {
  const { dwte, dwpe, dout, idx, B, T, C, vStart, Vl } = args;
  for (let bt = 0; bt < B * T; bt++) {
    const t = bt % T;
    const own = idx[bt] >= vStart && idx[bt] - vStart < Vl;
    for (let c = 0; c < C; c++) {
      if (own) dwte[(idx[bt] - vStart) * C + c] += dout[bt * C + c];
      dwpe[t * C + c] += dout[bt * C + c];
    }
  }
}

/** out (N, C) = res + (sum + bias broadcast over rows) */
export function refBiasResidual({ out, res, sum, bias, N, C }: { out: F64; res: F64; sum: F64; bias: F64; N: number; C: number }) {
  for (let i = 0; i < N * C; i++) out[i] = res[i] + (sum[i] + bias[i % C]);
}

/** layernorm over rows N: out (N, C), mean (N), rstd (N); biased variance */
export function refLayernormForward({
  out,
  mean,
  rstd,
  inp,
  weight,
  bias,
  N,
  C,
  eps = 1e-5,
}: {
  out: F64;
  mean: F64;
  rstd: F64;
  inp: F64;
  weight: F64;
  bias: F64;
  N: number;
  C: number;
  eps?: number;
}) {
  for (let n = 0; n < N; n++) {
    const o = n * C;
    let s = 0;
    for (let c = 0; c < C; c++) s += inp[o + c];
    const m = s / C;
    let v = 0;
    for (let c = 0; c < C; c++) v += (inp[o + c] - m) ** 2;
    const r = 1 / Math.sqrt(v / C + eps);
    for (let c = 0; c < C; c++) out[o + c] = (inp[o + c] - m) * r * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

/** dinp (N, C) +=, dweight (C) +=, dbias (C) += ; uses the saved mean and rstd */
export function refLayernormBackward(args: {
  dinp: F64;
  dweight: F64;
  dbias: F64;
  dout: F64;
  inp: F64;
  weight: F64;
  mean: F64;
  rstd: F64;
  N: number;
  C: number;
}) {
  const { dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C } = args;
  for (let n = 0; n < N; n++) {
    const o = n * C;
    let sd = 0;
    let sdn = 0;
    for (let c = 0; c < C; c++) {
      const dn = weight[c] * dout[o + c];
      sd += dn;
      sdn += dn * (inp[o + c] - mean[n]) * rstd[n];
    }
    const md = sd / C;
    const mdn = sdn / C;
    for (let c = 0; c < C; c++) {
      const nrm = (inp[o + c] - mean[n]) * rstd[n];
      const dn = weight[c] * dout[o + c];
      dinp[o + c] += (dn - md - nrm * mdn) * rstd[n];
      dweight[c] += dout[o + c] * nrm;
      dbias[c] += dout[o + c];
    }
  }
}

const S2PI = Math.sqrt(2 / Math.PI);

/** out (n) = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
export function refGeluForward({ out, inp, n }: { out: F64; inp: F64; n: number }) {
  for (let i = 0; i < n; i++) {
    const x = inp[i];
    out[i] = 0.5 * x * (1 + Math.tanh(S2PI * (x + 0.044715 * x ** 3)));
  }
}

/** dinp (n) = dout * gelu'(inp) (overwrite) */
export function refGeluBackward({ dinp, inp, dout, n }: { dinp: F64; inp: F64; dout: F64; n: number }) {
  for (let i = 0; i < n; i++) {
    const x = inp[i];
    const th = Math.tanh(S2PI * (x + 0.044715 * x ** 3));
    const g = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * S2PI * (1 + 3 * 0.044715 * x * x);
    dinp[i] = dout[i] * g;
  }
}

/** causal attention: out (B, T, C), att (B, NH, T, T) (0 above the diagonal) from qkv (B, T, 3C) */
export function refAttentionForward({
  out,
  att,
  qkv,
  B,
  T,
  C,
  NH,
}: {
  out: F64;
  att: F64;
  qkv: F64;
  B: number;
  T: number;
  C: number;
  NH: number;
}) {
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const C3 = 3 * C;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < NH; h++)
      for (let t = 0; t < T; t++) {
        const a0 = ((b * NH + h) * T + t) * T;
        const q0 = (b * T + t) * C3 + h * hs;
        let mx = -Infinity;
        for (let t2 = 0; t2 <= t; t2++) {
          const k0 = (b * T + t2) * C3 + C + h * hs;
          let s = 0;
          for (let d = 0; d < hs; d++) s += qkv[q0 + d] * qkv[k0 + d];
          att[a0 + t2] = s * scale;
          mx = Math.max(mx, s * scale);
        }
        let sum = 0;
        for (let t2 = 0; t2 <= t; t2++) {
          att[a0 + t2] = Math.exp(att[a0 + t2] - mx);
          sum += att[a0 + t2];
        }
        for (let t2 = 0; t2 < T; t2++) att[a0 + t2] = t2 <= t ? att[a0 + t2] / sum : 0;
        for (let d = 0; d < hs; d++) {
          let o = 0;
          for (let t2 = 0; t2 <= t; t2++) o += att[a0 + t2] * qkv[(b * T + t2) * C3 + 2 * C + h * hs + d];
          out[(b * T + t) * C + h * hs + d] = o;
        }
      }
}

/** dqkv (B, T, 3C) = gradient of attentionForward's out given dout (B, T, C) (overwrite) */
export function refAttentionBackward({
  dqkv,
  dout,
  qkv,
  att,
  B,
  T,
  C,
  NH,
}: {
  dqkv: F64;
  dout: F64;
  qkv: F64;
  att: F64;
  B: number;
  T: number;
  C: number;
  NH: number;
}) {
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const C3 = 3 * C;
  dqkv.fill(0, 0, B * T * C3);
  const datt = new Float64Array(T);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < NH; h++)
      for (let t = 0; t < T; t++) {
        const a0 = ((b * NH + h) * T + t) * T;
        const o0 = (b * T + t) * C + h * hs;
        const q0 = (b * T + t) * C3 + h * hs;
        let s = 0;
        for (let t2 = 0; t2 <= t; t2++) {
          const v0 = (b * T + t2) * C3 + 2 * C + h * hs;
          let da = 0;
          for (let d = 0; d < hs; d++) {
            da += dout[o0 + d] * qkv[v0 + d];
            dqkv[v0 + d] += att[a0 + t2] * dout[o0 + d]; // dv
          }
          datt[t2] = da;
          s += att[a0 + t2] * da;
        }
        for (let t2 = 0; t2 <= t; t2++) {
          const dpre = att[a0 + t2] * (datt[t2] - s) * scale;
          const k0 = (b * T + t2) * C3 + C + h * hs;
          for (let d = 0; d < hs; d++) {
            dqkv[q0 + d] += dpre * qkv[k0 + d];
            dqkv[k0 + d] += dpre * qkv[q0 + d];
          }
        }
      }
}

/** losses (N) = logsumexp(logits_n) - logits_n[t_n]; targets >= V are ignored (loss 0) */
/**
 * losses (N) = -log softmax(logits[n, :V])[targets[n]] (0 for targets >= V); logits (N, Vp), Vp >= V
 * (default V): columns V .. Vp-1 pad the vocabulary and are left out of the softmax
 */
export function refCrossEntropyForward({
  losses,
  logits,
  targets,
  N,
  V,
  Vp = V,
}: {
  losses: F64;
  logits: F64;
  targets: U32;
  N: number;
  V: number;
  Vp?: number;
}) {
  for (let n = 0; n < N; n++) {
    const o = n * Vp;
    let mx = -Infinity;
    for (let v = 0; v < V; v++) mx = Math.max(mx, logits[o + v]);
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(logits[o + v] - mx);
    losses[n] = targets[n] < V ? Math.log(s) + mx - logits[o + targets[n]] : 0;
  }
}

/**
 * losses as above; dlogits (N, Vp) = (softmax - onehot) * dlossScale * scale (0 for ignored rows
 * and on the padding columns V .. Vp-1). dlogits may be logits.
 */
export function refSoftmaxCrossEntropy(args: {
  losses: F64;
  dlogits: F64;
  logits: F64;
  targets: U32;
  N: number;
  V: number;
  Vp?: number;
  dlossScale: number;
  scale?: number;
}) {
  const { losses, dlogits, logits, targets, N, V, dlossScale } = args;
  const Vp = args.Vp ?? V;
  const scale = args.scale ?? 1;
  refCrossEntropyForward({ losses, logits, targets, N, V, Vp });
  for (let n = 0; n < N; n++) {
    const o = n * Vp;
    let mx = -Infinity;
    for (let v = 0; v < V; v++) mx = Math.max(mx, logits[o + v]);
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(logits[o + v] - mx);
    const tgt = targets[n];
    const sc = tgt < V ? dlossScale * scale : 0;
    const probs = new Float64Array(V);
    for (let v = 0; v < V; v++) probs[v] = Math.exp(logits[o + v] - mx) / s;
    for (let v = 0; v < V; v++) dlogits[o + v] = (probs[v] - (v === tgt ? 1 : 0)) * sc;
    for (let v = V; v < Vp; v++) dlogits[o + v] = 0;
  }
}

/** out[0] = scale * sum(inp) */
export function refSum({ out, inp, n, scale = 1 }: { out: F64; inp: F64; n: number; scale?: number }) {
  let s = 0;
  for (let i = 0; i < n; i++) s += inp[i];
  out[0] = scale * s;
}

/** out[0] (+)= sum(inp^2) */
export function refSumSquares({ out, inp, n, accumulate }: { out: F64; inp: F64; n: number; accumulate?: boolean }) {
  let s = 0;
  for (let i = 0; i < n; i++) s += inp[i] * inp[i];
  out[0] = accumulate ? out[0] + s : s;
}

export function refAdd({ out, a, b, n }: { out: F64; a: F64; b: F64; n: number }) {
  for (let i = 0; i < n; i++) out[i] = a[i] + b[i];
}

export function refAddInPlace({ dst, src, n }: { dst: F64; src: F64; n: number }) {
  for (let i = 0; i < n; i++) dst[i] += src[i];
}

export function refScale({ x, n, factor }: { x: F64; n: number; factor: number }) {
  for (let i = 0; i < n; i++) x[i] *= factor;
}

export interface RefAdamwHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  step: number;
  maxGradNorm: number;
}

/**
 * One AdamW step (PyTorch semantics) on params, m, v in place; grads are read, not modified.
 * Gradients are scaled by min(1, maxGradNorm / (sqrt(gradSumSq[0]) + 1e-6)) when maxGradNorm > 0.
 * The GPU launcher takes the hyper-parameters through set(h); here they are the second argument.
 */
export function refAdamw(
  { params, grads, m, v, n, gradSumSq }: { params: F64; grads: F64; m: F64; v: F64; n: number; gradSumSq?: F64 | null },
  h: RefAdamwHyper,
) {
  const clip = h.maxGradNorm > 0 ? Math.min(1, h.maxGradNorm / (Math.sqrt(gradSumSq ? gradSumSq[0] : 0) + 1e-6)) : 1;
  const bc1 = 1 - h.beta1 ** h.step;
  const bc2 = 1 - h.beta2 ** h.step;
  for (let i = 0; i < n; i++) {
    const g = grads[i] * clip;
    params[i] -= h.lr * h.weightDecay * params[i];
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * g * g;
    params[i] -= (h.lr * (m[i] / bc1)) / (Math.sqrt(v[i] / bc2) + h.eps);
  }
}
