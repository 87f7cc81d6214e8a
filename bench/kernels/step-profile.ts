// Time every kernel launch of one training step of a GPT preset, one op at a time (each
// repeated and synced), to see where a step's time goes. Shapes follow workers/model/gpt.ts.
// Run: npx tsx bench/kernels/step-profile.ts [B T C NH V L]   (default: the tiny preset, V 65)
import { openDevice } from '../../workers/gpu/device.js';
import type { Dispatch } from '../../workers/gpu/runtime.js';
import { Runtime } from '../../workers/gpu/runtime.js';
import { adamw } from '../../workers/kernels/adamw.js';
import { attentionBackward, attentionForward } from '../../workers/kernels/attention.js';
import { biasBackward } from '../../workers/kernels/bias-backward.js';
import { crossEntropyForward, softmaxCrossEntropy } from '../../workers/kernels/crossentropy.js';
import { encoderBackward, encoderForward } from '../../workers/kernels/encoder.js';
import { geluBackward, geluForward } from '../../workers/kernels/gelu.js';
import { layernormBackward, layernormForward } from '../../workers/kernels/layernorm.js';
import { matmul } from '../../workers/kernels/matmul.js';
import { sum, sumSquares } from '../../workers/kernels/reduce.js';
import { addInPlace } from '../../workers/kernels/residual.js';

async function main() {
  const [B, T, C, NH, V, L] = process.argv
    .slice(2)
    .map(Number)
    .concat([8, 64, 64, 2, 65, 2].slice(process.argv.length - 2));
  const rt = new Runtime(await openDevice());
  const N = B * T;
  const t = (name: string, numel: number) => rt.allocator.tensor(name, 'workspace', [numel]);
  const x = t('x', N * C);
  const y = t('y', N * C);
  const ln = t('ln', N * C);
  const mean = t('mean', N);
  const rstd = t('rstd', N);
  const w = t('w', 4 * C * C);
  const wb = t('wb', 4 * C);
  const qkv = t('qkv', N * 3 * C);
  const dqkv = t('dqkv', N * 3 * C);
  const att = t('att', B * NH * T * T);
  const fch = t('fch', N * 4 * C);
  const fchg = t('fchg', N * 4 * C);
  const dfch = t('dfch', N * 4 * C);
  const logits = t('logits', N * V);
  const wte = t('wte', V * C);
  const dwte = t('dwte', V * C);
  const wpe = t('wpe', T * C);
  const dwpe = t('dwpe', T * C);
  const idx = t('idx', N);
  const losses = t('losses', N);
  const loss = t('loss', 1);
  const dw = t('dw', 4 * C * C);
  const dwb = t('dwb', 4 * C);
  const dwb2 = t('dwb2', 4 * C);
  const nParams = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  const params = t('params', nParams);
  const grads = t('grads', nParams);
  const m = t('m', nParams);
  const v = t('v', nParams);
  const gss = t('gss', 1);
  rt.write(
    idx,
    Uint32Array.from({ length: N }, (_, i) => (i * 7) % V),
  );
  rt.write(
    x,
    Float32Array.from({ length: N * C }, (_, i) => Math.sin(i)),
  );
  rt.write(
    qkv,
    Float32Array.from({ length: N * 3 * C }, (_, i) => Math.cos(i)),
  );
  rt.write(
    logits,
    Float32Array.from({ length: N * V }, (_, i) => Math.sin(i * 0.3)),
  );

  const ops: [string, Dispatch[], number][] = [
    ['encoderForward', encoderForward(rt, { out: x, idx, wte, wpe, B, T, C }), 1],
    ['layernormForward', layernormForward(rt, { out: ln, mean, rstd, inp: x, weight: wb, bias: dwb2, N, C }), 2 * L + 1],
    ['matmul qkv (NT+bias)', matmul(rt, { out: qkv, a: ln, b: w, bias: wb, M: N, N: 3 * C, K: C, transB: true }), L],
    ['attentionForward', attentionForward(rt, { out: y, att, qkv, B, T, C, NH }), L],
    ['matmul proj (NT+acc)', matmul(rt, { out: x, a: y, b: w, bias: wb, M: N, N: C, K: C, transB: true, accumulate: true }), L],
    ['matmul fc (NT+bias)', matmul(rt, { out: fch, a: ln, b: w, bias: wb, M: N, N: 4 * C, K: C, transB: true }), L],
    ['geluForward', geluForward(rt, { out: fchg, inp: fch, n: N * 4 * C }), L],
    ['matmul fcproj (NT+acc)', matmul(rt, { out: x, a: fchg, b: w, bias: wb, M: N, N: C, K: 4 * C, transB: true, accumulate: true }), L],
    ['matmul logits (NT)', matmul(rt, { out: logits, a: ln, b: wte, M: N, N: V, K: C, transB: true }), 1],
    ['softmaxCrossEntropy', softmaxCrossEntropy(rt, { losses, dlogits: logits, logits, targets: idx, N, V, dlossScale: 1 / N }), 1],
    ['sum loss', sum(rt, { out: loss, inp: losses, n: N, scale: 1 / N }), 1],
    ['matmul dln (NN, K=V)', matmul(rt, { out: ln, a: logits, b: wte, M: N, N: C, K: V }), 1],
    ['matmul dwte (TN, M=V)', matmul(rt, { out: dwte, a: logits, b: ln, M: V, N: C, K: N, transA: true, accumulate: true }), 1],
    [
      'layernormBackward',
      layernormBackward(rt, { dinp: y, dweight: dwb, dbias: dwb2, dout: ln, inp: x, weight: wb, mean, rstd, N, C }),
      2 * L + 1,
    ],
    ['matmul dfch (NN)', matmul(rt, { out: dfch, a: y, b: w, M: N, N: 4 * C, K: C }), L],
    ['matmul dWfcproj (TN)', matmul(rt, { out: dw, a: y, b: fchg, M: C, N: 4 * C, K: N, transA: true, accumulate: true }), L],
    ['biasBackward C', biasBackward(rt, { dbias: dwb, dout: y, M: N, N: C, accumulate: true }), 2 * L],
    ['geluBackward (in place)', geluBackward(rt, { dinp: dfch, inp: fch, dout: dfch, n: N * 4 * C }), L],
    ['matmul dln (NN, K=4C)', matmul(rt, { out: ln, a: dfch, b: w, M: N, N: C, K: 4 * C }), L],
    ['matmul dWfc (TN)', matmul(rt, { out: dw, a: dfch, b: ln, M: 4 * C, N: C, K: N, transA: true, accumulate: true }), L],
    ['biasBackward 4C', biasBackward(rt, { dbias: dwb, dout: dfch, M: N, N: 4 * C, accumulate: true }), L],
    ['matmul datty (NN)', matmul(rt, { out: y, a: x, b: w, M: N, N: C, K: C }), L],
    ['matmul dWproj (TN)', matmul(rt, { out: dw, a: x, b: y, M: C, N: C, K: N, transA: true, accumulate: true }), L],
    ['attentionBackward', attentionBackward(rt, { dqkv, dout: y, qkv, att, B, T, C, NH }), L],
    ['matmul dln (NN, K=3C)', matmul(rt, { out: ln, a: dqkv, b: w, M: N, N: C, K: 3 * C }), L],
    ['matmul dWattn (TN)', matmul(rt, { out: dw, a: dqkv, b: ln, M: 3 * C, N: C, K: N, transA: true, accumulate: true }), L],
    ['biasBackward 3C', biasBackward(rt, { dbias: dwb, dout: dqkv, M: N, N: 3 * C, accumulate: true }), L],
    ['encoderBackward', encoderBackward(rt, { dwte, dwpe, dout: x, idx, B, T, C, V }), 1],
    ['sumSquares grads', sumSquares(rt, { out: gss, inp: grads, n: nParams }), 1],
    ['adamw all params', adamw(rt, { params, grads, m, v, n: nParams, gradSumSq: gss }).dispatches, 1],
    ['crossEntropyForward', crossEntropyForward(rt, { losses, logits, targets: idx, N, V }), 0],
    ['addInPlace', addInPlace(rt, { dst: x, src: y, n: N * C }), 0],
  ];
  const rows: { op: string; ms: number; cpuMs: number; perStep: number; total: number; cpuTotal: number }[] = [];
  for (const [name, d, perStep] of ops) {
    rt.run(d);
    await rt.sync();
    const reps = 10;
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (let i = 0; i < reps; i++) rt.run(d);
    await rt.sync();
    const ms = (performance.now() - t0) / reps;
    const c = process.cpuUsage(c0);
    // CPU time of this process over 2 cores: the wall time an otherwise idle 2-core machine would see
    const cpuMs = (c.user + c.system) / 1000 / reps / 2;
    rows.push({ op: name, ms, cpuMs, perStep, total: ms * perStep, cpuTotal: cpuMs * perStep });
  }
  await rt.checkErrors();
  const total = rows.reduce((s, r) => s + r.total, 0);
  const cpuTotal = rows.reduce((s, r) => s + r.cpuTotal, 0);
  rows.sort((p, q) => q.cpuTotal - p.cpuTotal);
  process.stdout.write(
    `B=${B} T=${T} C=${C} NH=${NH} V=${V} L=${L}: kernels of one step ~ ${total.toFixed(1)} ms wall, ${cpuTotal.toFixed(1)} ms CPU/2\n`,
  );
  for (const r of rows) {
    process.stdout.write(
      `${r.op.padEnd(28)} ${r.ms.toFixed(2).padStart(8)} ms x${r.perStep} = ${r.total.toFixed(2).padStart(8)} ms | CPU/2 ${r.cpuTotal.toFixed(2).padStart(8)} ms\n`,
    );
  }
  rt.destroy();
}

await main();
