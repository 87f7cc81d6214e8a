// The float64 reference backward ops agree with central finite differences of the reference
// forward ops (so the GPU kernels, checked against these references, compute true gradients).
// Each case: a scalar L = sum(out * G) for a fixed random G (or the summed losses), its
// analytic gradient from the ref*Backward op, and (L(x + h) - L(x - h)) / 2h, h = 1e-6.
import { describe, expect, it } from 'vitest';
import {
  refAttentionBackward,
  refAttentionForward,
  refBiasBackward,
  refEncoderBackward,
  refEncoderForward,
  refGeluBackward,
  refGeluForward,
  refLayernormBackward,
  refLayernormForward,
  refMatmul,
  refSoftmaxCrossEntropy,
} from '../../reference/ops.js';
import { f64, rng } from './helpers.js';

const H = 1e-6;
const TOL = 1e-6; // |analytic - numeric| / max(|analytic|, 1e-3)

function checkGrad(name: string, x: Float64Array, analytic: Float64Array, loss: () => number, indices: number[]) {
  for (const i of indices) {
    const x0 = x[i];
    x[i] = x0 + H;
    const lp = loss();
    x[i] = x0 - H;
    const lm = loss();
    x[i] = x0;
    const numeric = (lp - lm) / (2 * H);
    const err = Math.abs(analytic[i] - numeric) / Math.max(Math.abs(analytic[i]), 1e-3);
    expect(err, `${name}[${i}]: analytic ${analytic[i]} numeric ${numeric}`).toBeLessThan(TOL);
  }
}

const dot = (a: Float64Array, b: Float64Array) => a.reduce((s, v, i) => s + v * b[i], 0);
const pick = (n: number, k: number, seed: number) => {
  const r = rng(seed);
  return Array.from({ length: Math.min(k, n) }, (_, j) => (k >= n ? j : Math.floor(r.next() * n)));
};

describe('reference backward ops agree with float64 finite differences', () => {
  it('matmul (dA, dB via transposed matmuls) and biasBackward', () => {
    const [M, N, K] = [5, 7, 3];
    const r = rng(1);
    const a = f64(r.f32(M * K));
    const b = f64(r.f32(K * N));
    const bias = f64(r.f32(N));
    const G = f64(r.f32(M * N));
    const out = new Float64Array(M * N);
    const loss = () => {
      refMatmul({ out, a, b, bias, M, N, K });
      return dot(out, G);
    };
    const da = new Float64Array(M * K);
    refMatmul({ out: da, a: G, b, M, N: K, K: N, transB: true });
    const db = new Float64Array(K * N);
    refMatmul({ out: db, a, b: G, M: K, N, K: M, transA: true });
    const dbias = new Float64Array(N);
    refBiasBackward({ dbias, dout: G, M, N });
    checkGrad('dA', a, da, loss, pick(M * K, 99, 0));
    checkGrad('dB', b, db, loss, pick(K * N, 99, 0));
    checkGrad('dbias', bias, dbias, loss, pick(N, 99, 0));
  });

  it('layernorm (dinp, dweight, dbias)', () => {
    const [N, C] = [3, 7];
    const r = rng(2);
    const inp = f64(r.f32(N * C, -1, 2));
    const w = f64(r.f32(C, 0.5, 1.5));
    const bias = f64(r.f32(C));
    const G = f64(r.f32(N * C));
    const out = new Float64Array(N * C);
    const mean = new Float64Array(N);
    const rstd = new Float64Array(N);
    const loss = () => {
      refLayernormForward({ out, mean, rstd, inp, weight: w, bias, N, C });
      return dot(out, G);
    };
    loss();
    const g = { dinp: new Float64Array(N * C), dweight: new Float64Array(C), dbias: new Float64Array(C) };
    refLayernormBackward({ ...g, dout: G, inp, weight: w, mean: mean.slice(), rstd: rstd.slice(), N, C });
    checkGrad('dinp', inp, g.dinp, loss, pick(N * C, 99, 0));
    checkGrad('dweight', w, g.dweight, loss, pick(C, 99, 0));
    checkGrad('dbias', bias, g.dbias, loss, pick(C, 99, 0));
  });

  it('gelu', () => {
    const n = 9;
    const x = Float64Array.from([-5, -3, -1.5, -0.3, 0, 0.2, 1, 2.5, 4]);
    const G = f64(rng(3).f32(n));
    const out = new Float64Array(n);
    const dx = new Float64Array(n);
    refGeluBackward({ dinp: dx, inp: x, dout: G, n });
    checkGrad('dinp', x, dx, () => (refGeluForward({ out, inp: x, n }), dot(out, G)), pick(n, 99, 0));
  });

  it('attention (dq, dk, dv through the causal softmax)', () => {
    const [B, T, C, NH] = [2, 4, 6, 2];
    const r = rng(4);
    const qkv = f64(r.normal(B * T * 3 * C, 1));
    const G = f64(r.f32(B * T * C));
    const out = new Float64Array(B * T * C);
    const att = new Float64Array(B * NH * T * T);
    const loss = () => {
      refAttentionForward({ out, att, qkv, B, T, C, NH });
      return dot(out, G);
    };
    loss();
    const dqkv = new Float64Array(B * T * 3 * C);
    refAttentionBackward({ dqkv, dout: G, qkv, att: att.slice(), B, T, C, NH });
    checkGrad('dqkv', qkv, dqkv, loss, pick(B * T * 3 * C, 999, 0));
  });

  it('softmax cross-entropy (dlogits = d(dlossScale * sum losses) / dlogits)', () => {
    const [N, V] = [3, 5];
    const r = rng(5);
    const logits = f64(r.normal(N * V, 2));
    const targets = Uint32Array.from([1, 4, 0]);
    const scale = 0.37;
    const losses = new Float64Array(N);
    const loss = () => {
      refSoftmaxCrossEntropy({ losses, dlogits: new Float64Array(N * V), logits, targets, N, V, dlossScale: scale });
      return scale * losses.reduce((s, v) => s + v, 0);
    };
    const dlogits = new Float64Array(N * V);
    refSoftmaxCrossEntropy({ losses, dlogits, logits, targets, N, V, dlossScale: scale });
    checkGrad('dlogits', logits, dlogits, loss, pick(N * V, 99, 0));
  });

  it('encoder (dwte with repeated tokens, dwpe)', () => {
    const [B, T, C, V] = [2, 3, 4, 5];
    const r = rng(6);
    const idx = Uint32Array.from([1, 1, 3, 0, 1, 4]);
    const wte = f64(r.f32(V * C));
    const wpe = f64(r.f32(T * C));
    const G = f64(r.f32(B * T * C));
    const out = new Float64Array(B * T * C);
    const loss = () => (refEncoderForward({ out, idx, wte, wpe, B, T, C }), dot(out, G));
    const dwte = new Float64Array(V * C);
    const dwpe = new Float64Array(T * C);
    refEncoderBackward({ dwte, dwpe, dout: G, idx, B, T, C, V });
    checkGrad('dwte', wte, dwte, loss, pick(V * C, 99, 0));
    checkGrad('dwpe', wpe, dwpe, loss, pick(T * C, 99, 0));
  });
});
