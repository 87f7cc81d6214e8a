// An independent float64 GPT-2 (nanoGPT semantics) with a hand-written backward, written
// from the equations and not from the GPU code: the model tests check the WebGPU engine's
// loss and every gradient against it, and check it against finite differences.
import type { GptConfig } from '../../workers/model/config.js';

export type Params64 = Map<string, Float64Array>;

const GELU_K = Math.sqrt(2 / Math.PI);

interface LnCache {
  xhat: Float64Array;
  rstd: Float64Array;
}

function layernorm(x: Float64Array, w: Float64Array, b: Float64Array, N: number, C: number): { y: Float64Array; cache: LnCache } {
  const y = new Float64Array(N * C);
  const xhat = new Float64Array(N * C);
  const rstd = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    let mean = 0;
    for (let c = 0; c < C; c++) mean += x[i * C + c]!;
    mean /= C;
    let v = 0;
    for (let c = 0; c < C; c++) v += (x[i * C + c]! - mean) ** 2;
    v /= C;
    const r = 1 / Math.sqrt(v + 1e-5);
    rstd[i] = r;
    for (let c = 0; c < C; c++) {
      const h = (x[i * C + c]! - mean) * r;
      xhat[i * C + c] = h;
      y[i * C + c] = h * w[c]! + b[c]!;
    }
  }
  return { y, cache: { xhat, rstd } };
}

function layernormBack(
  dy: Float64Array,
  w: Float64Array,
  cache: LnCache,
  N: number,
  C: number,
  dx: Float64Array,
  dw: Float64Array,
  db: Float64Array,
) {
  for (let i = 0; i < N; i++) {
    let m1 = 0;
    let m2 = 0;
    for (let c = 0; c < C; c++) {
      const g = dy[i * C + c]! * w[c]!;
      m1 += g;
      m2 += g * cache.xhat[i * C + c]!;
    }
    m1 /= C;
    m2 /= C;
    for (let c = 0; c < C; c++) {
      const h = cache.xhat[i * C + c]!;
      const g = dy[i * C + c]! * w[c]!;
      dx[i * C + c] = dx[i * C + c]! + cache.rstd[i]! * (g - m1 - h * m2);
      dw[c] = dw[c]! + dy[i * C + c]! * h;
      db[c] = db[c]! + dy[i * C + c]!;
    }
  }
}

/** y (N,OC) = x (N,IC) @ W^T + b, W (OC,IC) */
function linear(x: Float64Array, W: Float64Array, b: Float64Array | null, N: number, IC: number, OC: number): Float64Array {
  const y = new Float64Array(N * OC);
  for (let i = 0; i < N; i++)
    for (let o = 0; o < OC; o++) {
      let s = b ? b[o]! : 0;
      for (let k = 0; k < IC; k++) s += x[i * IC + k]! * W[o * IC + k]!;
      y[i * OC + o] = s;
    }
  return y;
}

function linearBack(
  dy: Float64Array,
  x: Float64Array,
  W: Float64Array,
  N: number,
  IC: number,
  OC: number,
  dx: Float64Array,
  dW: Float64Array,
  db: Float64Array | null,
) {
  for (let i = 0; i < N; i++)
    for (let o = 0; o < OC; o++) {
      const g = dy[i * OC + o]!;
      if (g === 0) continue;
      if (db) db[o] = db[o]! + g;
      for (let k = 0; k < IC; k++) {
        dx[i * IC + k] = dx[i * IC + k]! + g * W[o * IC + k]!;
        dW[o * IC + k] = dW[o * IC + k]! + g * x[i * IC + k]!;
      }
    }
}

export interface RefResult {
  loss: number;
  losses: Float64Array;
  grads: Params64;
}

/** Mean cross-entropy over the B*T tokens and (when wanted) every parameter's gradient. */
export function refGpt(
  cfg: GptConfig,
  P: Params64,
  idx: Uint32Array,
  targets: Uint32Array,
  B: number,
  T: number,
  wantGrads = true,
): RefResult {
  const C = cfg.d_model;
  const V = cfg.vocab_size;
  const NH = cfg.n_head;
  const hs = C / NH;
  const N = B * T;
  const L = cfg.n_layer;
  const p = (n: string) => P.get(n)!;
  const wte = p('transformer.wte.weight');
  const wpe = p('transformer.wpe.weight');

  let x = new Float64Array(N * C);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++) for (let c = 0; c < C; c++) x[(b * T + t) * C + c] = wte[idx[b * T + t]! * C + c]! + wpe[t * C + c]!;

  type Cache = {
    x: Float64Array;
    ln1: ReturnType<typeof layernorm>;
    qkv: Float64Array;
    att: Float64Array;
    y: Float64Array;
    x2: Float64Array;
    ln2: ReturnType<typeof layernorm>;
    h: Float64Array;
    hg: Float64Array;
  };
  const caches: Cache[] = [];
  for (let l = 0; l < L; l++) {
    const w = (n: string) => p(`transformer.h.${l}.${n}`);
    const ln1 = layernorm(x, w('ln_1.weight'), w('ln_1.bias'), N, C);
    const qkv = linear(ln1.y, w('attn.c_attn.weight'), w('attn.c_attn.bias'), N, C, 3 * C);
    const att = new Float64Array(B * NH * T * T);
    const y = new Float64Array(N * C);
    const scale = 1 / Math.sqrt(hs);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < NH; h++)
        for (let t = 0; t < T; t++) {
          const row = ((b * NH + h) * T + t) * T;
          let max = -Infinity;
          for (let s = 0; s <= t; s++) {
            let d = 0;
            for (let k = 0; k < hs; k++) d += qkv[(b * T + t) * 3 * C + h * hs + k]! * qkv[(b * T + s) * 3 * C + C + h * hs + k]!;
            att[row + s] = d * scale;
            max = Math.max(max, d * scale);
          }
          let z = 0;
          for (let s = 0; s <= t; s++) {
            att[row + s] = Math.exp(att[row + s]! - max);
            z += att[row + s]!;
          }
          for (let s = 0; s <= t; s++) att[row + s] = att[row + s]! / z;
          for (let k = 0; k < hs; k++) {
            let o = 0;
            for (let s = 0; s <= t; s++) o += att[row + s]! * qkv[(b * T + s) * 3 * C + 2 * C + h * hs + k]!;
            y[(b * T + t) * C + h * hs + k] = o;
          }
        }
    const proj = linear(y, w('attn.c_proj.weight'), w('attn.c_proj.bias'), N, C, C);
    const x2 = new Float64Array(N * C);
    for (let i = 0; i < N * C; i++) x2[i] = x[i]! + proj[i]!;
    const ln2 = layernorm(x2, w('ln_2.weight'), w('ln_2.bias'), N, C);
    const hpre = linear(ln2.y, w('mlp.c_fc.weight'), w('mlp.c_fc.bias'), N, C, 4 * C);
    const hg = hpre.map((u) => 0.5 * u * (1 + Math.tanh(GELU_K * (u + 0.044715 * u ** 3))));
    const mo = linear(hg, w('mlp.c_proj.weight'), w('mlp.c_proj.bias'), N, 4 * C, C);
    const x3 = new Float64Array(N * C);
    for (let i = 0; i < N * C; i++) x3[i] = x2[i]! + mo[i]!;
    caches.push({ x, ln1, qkv, att, y, x2, ln2, h: hpre, hg });
    x = x3;
  }
  const lnf = layernorm(x, p('transformer.ln_f.weight'), p('transformer.ln_f.bias'), N, C);
  const logits = linear(lnf.y, wte, null, N, C, V);
  const losses = new Float64Array(N);
  const dlogits = new Float64Array(N * V);
  let loss = 0;
  for (let i = 0; i < N; i++) {
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[i * V + v]!);
    let z = 0;
    for (let v = 0; v < V; v++) z += Math.exp(logits[i * V + v]! - max);
    const tgt = targets[i]!;
    losses[i] = -(logits[i * V + tgt]! - max - Math.log(z));
    loss += losses[i]! / N;
    for (let v = 0; v < V; v++) dlogits[i * V + v] = (Math.exp(logits[i * V + v]! - max) / z - (v === tgt ? 1 : 0)) / N;
  }
  const grads: Params64 = new Map([...P].map(([k, v]) => [k, new Float64Array(v.length)]));
  if (!wantGrads) return { loss, losses, grads };
  const g = (n: string) => grads.get(n)!;

  const dlnf = new Float64Array(N * C);
  linearBack(dlogits, lnf.y, wte, N, C, V, dlnf, g('transformer.wte.weight'), null);
  let dx = new Float64Array(N * C);
  layernormBack(dlnf, p('transformer.ln_f.weight'), lnf.cache, N, C, dx, g('transformer.ln_f.weight'), g('transformer.ln_f.bias'));
  for (let l = L - 1; l >= 0; l--) {
    const w = (n: string) => p(`transformer.h.${l}.${n}`);
    const gw = (n: string) => g(`transformer.h.${l}.${n}`);
    const k = caches[l]!;
    // x3 = x2 + mlp(x2): dx2 = dx + mlp'
    const dx2 = Float64Array.from(dx);
    const dhg = new Float64Array(N * 4 * C);
    linearBack(dx, k.hg, w('mlp.c_proj.weight'), N, 4 * C, C, dhg, gw('mlp.c_proj.weight'), gw('mlp.c_proj.bias'));
    const dh = dhg.map((d, i) => {
      const u = k.h[i]!;
      const inner = GELU_K * (u + 0.044715 * u ** 3);
      const th = Math.tanh(inner);
      return d * (0.5 * (1 + th) + 0.5 * u * (1 - th * th) * GELU_K * (1 + 3 * 0.044715 * u * u));
    });
    const dln2 = new Float64Array(N * C);
    linearBack(dh, k.ln2.y, w('mlp.c_fc.weight'), N, C, 4 * C, dln2, gw('mlp.c_fc.weight'), gw('mlp.c_fc.bias'));
    layernormBack(dln2, w('ln_2.weight'), k.ln2.cache, N, C, dx2, gw('ln_2.weight'), gw('ln_2.bias'));
    // x2 = x + proj(attn(ln1(x)))
    const dxin = Float64Array.from(dx2);
    const dy = new Float64Array(N * C);
    linearBack(dx2, k.y, w('attn.c_proj.weight'), N, C, C, dy, gw('attn.c_proj.weight'), gw('attn.c_proj.bias'));
    const dqkv = new Float64Array(N * 3 * C);
    const scale = 1 / Math.sqrt(hs);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < NH; h++)
        for (let t = 0; t < T; t++) {
          const row = ((b * NH + h) * T + t) * T;
          const datt = new Float64Array(t + 1);
          for (let s = 0; s <= t; s++) {
            let d = 0;
            for (let q = 0; q < hs; q++) {
              d += dy[(b * T + t) * C + h * hs + q]! * k.qkv[(b * T + s) * 3 * C + 2 * C + h * hs + q]!;
              dqkv[(b * T + s) * 3 * C + 2 * C + h * hs + q] =
                dqkv[(b * T + s) * 3 * C + 2 * C + h * hs + q]! + k.att[row + s]! * dy[(b * T + t) * C + h * hs + q]!;
            }
            datt[s] = d;
          }
          let dot = 0;
          for (let s = 0; s <= t; s++) dot += datt[s]! * k.att[row + s]!;
          for (let s = 0; s <= t; s++) {
            const dpre = k.att[row + s]! * (datt[s]! - dot) * scale;
            for (let q = 0; q < hs; q++) {
              dqkv[(b * T + t) * 3 * C + h * hs + q] =
                dqkv[(b * T + t) * 3 * C + h * hs + q]! + dpre * k.qkv[(b * T + s) * 3 * C + C + h * hs + q]!;
              dqkv[(b * T + s) * 3 * C + C + h * hs + q] =
                dqkv[(b * T + s) * 3 * C + C + h * hs + q]! + dpre * k.qkv[(b * T + t) * 3 * C + h * hs + q]!;
            }
          }
        }
    const dln1 = new Float64Array(N * C);
    linearBack(dqkv, k.ln1.y, w('attn.c_attn.weight'), N, C, 3 * C, dln1, gw('attn.c_attn.weight'), gw('attn.c_attn.bias'));
    layernormBack(dln1, w('ln_1.weight'), k.ln1.cache, N, C, dxin, gw('ln_1.weight'), gw('ln_1.bias'));
    dx = dxin;
  }
  const dwte = g('transformer.wte.weight');
  const dwpe = g('transformer.wpe.weight');
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++)
      for (let c = 0; c < C; c++) {
        const d = dx[(b * T + t) * C + c]!;
        dwte[idx[b * T + t]! * C + c] = dwte[idx[b * T + t]! * C + c]! + d;
        dwpe[t * C + c] = dwpe[t * C + c]! + d;
      }
  return { loss, losses, grads };
}
