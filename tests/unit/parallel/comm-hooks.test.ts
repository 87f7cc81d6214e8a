// DDP communication hooks in-process, over a simulated group of W ranks (every all-reduce sums
// the ranks' buffers exactly, in float64, then rounds to the payload's dtype): fp16 and bf16
// compression, PowerSGD's start iteration, per-tensor low-rank approximation, uncompressed 1-D
// tensors, error feedback, bytes, and its state carried across a checkpoint exactly; on an
// emulated shape (benchmarks), the shape's payloads on the wire and PowerSGD's math on the device.
import { describe, expect, it } from 'vitest';
import { bfloat16ToFloat, floatToBfloat16, floatToHalf, halfToFloat, type ProcessGroup } from '../../../workers/comm/index.js';
import { simulatedGroups } from './simulated-groups.js';
import {
  HalfCompressHook,
  orthogonalize,
  PowerSgdHook,
  POWERSGD_DEFAULTS,
  type HookBucket,
  type HookDevice,
} from '../../../workers/comm-hooks/index.js';
import { gradCompressionLabel, parseGradCompression } from '../../../common/grad-compression.js';

// a bucket as DDP hands it over: a 24 x 16 weight, a 16-element bias, a 40 x 32 weight
const BUCKET: HookBucket = {
  index: 0,
  tensors: [
    { name: 'w1', shape: [24, 16], start: 0, numel: 384 },
    { name: 'b1', shape: [16], start: 384, numel: 16 },
    { name: 'w2', shape: [40, 32], start: 400, numel: 1280 },
  ],
  labels: { bucket: 0 },
};
const N = 1680;

/** rank r's gradients at step s (deterministic, different per rank and step) */
function grads(r: number, s: number): Float32Array {
  const g = new Float32Array(N);
  for (let i = 0; i < N; i++) g[i] = Math.sin(0.37 * i + 1.3 * r + 0.71 * s) * 0.01 + Math.cos(0.011 * i * (r + 1)) * 0.003;
  return g;
}
const exactSum = (s: number, W: number) => {
  const out = new Float64Array(N);
  for (let r = 0; r < W; r++) grads(r, s).forEach((x, i) => (out[i] += x));
  return out;
};

async function step(
  hooks: { run: PowerSgdHook['run']; endStep(): void; bucketReady?(b: HookBucket): void }[],
  pgs: ProcessGroup[],
  s: number,
  bucket = BUCKET,
): Promise<Float32Array[]> {
  const data = hooks.map((_, r) => grads(r, s));
  for (const h of hooks) h.bucketReady?.(bucket); // as DDP does before the bucket's readback
  await Promise.all(hooks.map((h, r) => h.run(pgs[r], bucket, data[r])));
  for (const h of hooks) h.endStep();
  return data;
}

const powerSgd = (o: Partial<ConstructorParameters<typeof PowerSgdHook>[0]> = {}) =>
  new PowerSgdHook({ ...POWERSGD_DEFAULTS, rank: 4, seed: 7, ...o });

describe('fp16 and bf16 compression hooks', () => {
  for (const [dtype, widen, narrow, eps] of [
    ['float16', halfToFloat, floatToHalf, 2 ** -11],
    ['bfloat16', bfloat16ToFloat, floatToBfloat16, 2 ** -8],
  ] as const) {
    it(`${dtype}: every rank gets the sum of its 16-bit casts, rounded once, and sends half the bytes`, async () => {
      const W = 2;
      const pgs = simulatedGroups(W);
      const hooks = [0, 1].map(() => new HalfCompressHook(dtype));
      const data = await step(hooks as never, pgs, 0);
      const want = exactSum(0, W);
      for (let i = 0; i < N; i++) {
        const cast = narrow(widen(narrow(grads(0, 0)[i])) + widen(narrow(grads(1, 0)[i])));
        expect(data[0][i]).toBe(widen(cast));
        // three roundings: each rank's cast and the sum's
        const a = grads(0, 0)[i],
          b = grads(1, 0)[i];
        expect(Math.abs(data[0][i] - want[i])).toBeLessThanOrEqual(eps * (Math.abs(a) + Math.abs(b) + Math.abs(want[i])) + 1e-12);
      }
      expect([...data[1]]).toEqual([...data[0]]);
      const r = hooks[0].report();
      expect(r.compressed_bytes * 2).toBe(r.uncompressed_bytes);
    });
  }
});

describe('PowerSGD', () => {
  it('orthogonalize leaves orthonormal columns', () => {
    const n = 50,
      r = 4;
    const a = new Float32Array(n * r).map((_, i) => Math.sin(i * 1.7) + 0.1 * i);
    orthogonalize(a, 0, n, r, 0);
    for (let i = 0; i < r; i++)
      for (let j = 0; j < r; j++) {
        let dot = 0;
        for (let k = 0; k < n; k++) dot += a[k * r + i] * a[k * r + j];
        expect(dot).toBeCloseTo(i === j ? 1 : 0, 5);
      }
  });

  it('before start_powerSGD_iter the bucket is all-reduced uncompressed (the exact sum)', async () => {
    const pgs = simulatedGroups(2);
    const hooks = [powerSgd({ startIter: 2 }), powerSgd({ startIter: 2 })];
    for (let s = 0; s < 2; s++) {
      const data = await step(hooks, pgs, s);
      const want = exactSum(s, 2);
      for (let i = 0; i < N; i++) expect(data[0][i]).toBe(Math.fround(want[i]));
    }
    expect(hooks[0].error.size).toBe(0);
  });

  it('then: biases exact, weights of rank <= R recovered, ranks agree, error feedback = input + old error - result, bytes (n+m)R per matrix', async () => {
    const W = 2;
    const pgs = simulatedGroups(W);
    const hooks = [powerSgd({ startIter: 0 }), powerSgd({ startIter: 0 })];
    const data = await step(hooks, pgs, 0);
    expect([...data[1]]).toEqual([...data[0]]);
    const want = exactSum(0, W);
    // the 1-D bias travels uncompressed: the exact sum (PyTorch: divided by W after a sum of W x the gradient)
    for (let i = 384; i < 400; i++) expect(data[0][i]).toBeCloseTo(want[i], 7);
    // error feedback: (W x the rank's gradients) - the result, for every element
    for (let i = 0; i < N; i++) expect(hooks[0].error.get(0)![i]).toBeCloseTo(W * grads(0, 0)[i] - data[0][i], 6);
    // the approximation is a real one: closer to the sum than zero is, not equal to it
    let err = 0,
      norm = 0;
    for (let i = 400; i < N; i++) {
      err += (data[0][i] - want[i]) ** 2;
      norm += want[i] ** 2;
    }
    expect(err).toBeLessThan(norm);
    expect(err).toBeGreaterThan(0);
    // bytes: 16 floats of bias, P and Q of rank 4 for both matrices
    const sent = (16 + (24 + 16) * 4 + (40 + 32) * 4) * 4;
    expect(await hooks[0].report()).toMatchObject({ uncompressed_bytes: N * 4, compressed_bytes: sent });

    // matrices whose sum has rank 4 are recovered exactly by rank 4 (a sum of lower rank is not:
    // Gram-Schmidt on P's dependent columns, as in PyTorch, loses orthogonality)
    const pgs2 = simulatedGroups(W);
    const exact = [powerSgd({ startIter: 0, errorFeedback: false }), powerSgd({ startIter: 0, errorFeedback: false })];
    const lowRank = (r: number) => {
      const g = new Float32Array(N);
      for (let a = 0; a < 40; a++)
        for (let j = 0; j < 32; j++)
          g[400 + a * 32 + j] =
            r === 0
              ? 0.01 * Math.sin(a) * Math.cos(j) + 0.002 * (a % 3) * (j % 5)
              : 0.01 * Math.cos(2 * a) * Math.sin(3 * j) + 0.001 * ((a * 7) % 5) * ((j * 3) % 4);
      return g;
    };
    const d = [lowRank(0), lowRank(1)];
    await Promise.all(exact.map((h, r) => h.run(pgs2[r], BUCKET, d[r])));
    for (let i = 400; i < N; i++) expect(d[0][i]).toBeCloseTo(lowRank(0)[i] + lowRank(1)[i], 6);
  });

  it('error feedback makes the compressed sums track the exact ones over steps (its norm is reported)', async () => {
    const W = 2;
    const pgs = simulatedGroups(W);
    const hooks = [powerSgd({ startIter: 0, rank: 1 }), powerSgd({ startIter: 0, rank: 1 })];
    // the same gradients every step: with error feedback the running mean of the results converges to them
    const acc = new Float64Array(N);
    const steps = 30;
    for (let s = 0; s < steps; s++) {
      const data = hooks.map((_, r) => grads(r, 0));
      await Promise.all(hooks.map((h, r) => h.run(pgs[r], BUCKET, data[r])));
      hooks.forEach((h) => h.endStep());
      data[0].forEach((x, i) => (acc[i] += x / steps));
    }
    const want = exactSum(0, W);
    let err = 0,
      norm = 0;
    for (let i = 400; i < N; i++) {
      err += (acc[i] - want[i]) ** 2;
      norm += want[i] ** 2;
    }
    expect(Math.sqrt(err / norm)).toBeLessThan(0.1);
    expect((await hooks[0].report()).error_feedback_norm).toBeGreaterThan(0);
  });

  it('its state (iteration, error feedback, warm-start Q) restored into a fresh hook continues bit for bit', async () => {
    const W = 2;
    const pgs = simulatedGroups(W);
    const a = [powerSgd({ startIter: 1 }), powerSgd({ startIter: 1 })];
    for (let s = 0; s < 4; s++) await step(a, pgs, s);
    const saved = await Promise.all(a.map((h) => h.state()));
    expect(saved[0].iter).toBe(4);
    expect([...saved[0].tensors.keys()].sort()).toEqual(['error.0', 'q.0']);
    const b = [powerSgd({ startIter: 1 }), powerSgd({ startIter: 1 })];
    b.forEach((h, r) => h.loadState(saved[r]));
    const pgsB = simulatedGroups(W);
    const [outA, outB] = [await step(a, pgs, 4), await step(b, pgsB, 4)];
    expect([...outB[0]]).toEqual([...outA[0]]);
    expect([...b[1].error.get(0)!]).toEqual([...a[1].error.get(0)!]);
    // and a hook that lost its state does not
    const c = [powerSgd({ startIter: 1 }), powerSgd({ startIter: 1 })];
    c.forEach((h) => (h.iter = 4));
    const outC = await step(c, simulatedGroups(W), 4);
    expect([...outC[0]]).not.toEqual([...outA[0]]);
  });
});

// the bucket as an emulated shape twice as wide sends and times it: 48 x 32, 32, 80 x 64 (benchmarks)
const WIDE: HookBucket = { ...BUCKET, tensors: BUCKET.tensors.map((t) => ({ ...t, wire: t.shape.map((x) => 2 * x) })) };
const WIDE_N = 48 * 32 + 32 + 80 * 64;

/** `pg` whose all-reduces are logged (payload length, part) into `log` before they are posted */
function logged(pg: ProcessGroup, log: unknown[][]): ProcessGroup {
  const spy = Object.create(pg) as ProcessGroup;
  spy.allReduce = ((buf: Float32Array | Uint16Array, o: { labels?: { part?: string } }) => {
    log.push(['allReduce', o.labels?.part ?? 'bucket', buf.length]);
    return pg.allReduce(buf as Float32Array, o as never);
  }) as ProcessGroup['allReduce'];
  return spy;
}

describe("on an emulated shape (bench:lan): the shape's payloads on the wire, the proxy's numbers", () => {
  it("fp16: the 16-bit payload has the shape's length; the sums are those of the real bucket", async () => {
    const log: unknown[][] = [];
    const pgs = simulatedGroups(2);
    const hooks = [new HalfCompressHook('float16'), new HalfCompressHook('float16')];
    const wide = await step(hooks as never, [logged(pgs[0], log), pgs[1]], 0, WIDE);
    const real = await step([new HalfCompressHook('float16'), new HalfCompressHook('float16')] as never, simulatedGroups(2), 0);
    expect([...wide[0]]).toEqual([...real[0]]);
    expect(log).toEqual([['allReduce', 'bucket', WIDE_N]]);
    expect(hooks[0].report()).toEqual({ uncompressed_bytes: WIDE_N * 4, compressed_bytes: WIDE_N * 2 });
  });

  it("PowerSGD: the shape's bucket first, then its uncompressed 1-D tensors, P and Q (rank 4); results and error feedback bit for bit the real ones", async () => {
    const log: unknown[][] = [];
    const pgs = simulatedGroups(2);
    const wide = [powerSgd({ startIter: 1 }), powerSgd({ startIter: 1 })];
    const real = [powerSgd({ startIter: 1 }), powerSgd({ startIter: 1 })];
    const pgsReal = simulatedGroups(2);
    for (let s = 0; s < 3; s++) {
      const [a, b] = [await step(wide, [logged(pgs[0], log), pgs[1]], s, WIDE), await step(real, pgsReal, s)];
      expect([...a[0]]).toEqual([...b[0]]);
      expect([...(wide[1].error.get(0) ?? [])]).toEqual([...(real[1].error.get(0) ?? [])]);
    }
    expect(wide[1].error.get(0)!.length).toBe(N);
    const [p, q] = [48 * 4 + 80 * 4, 32 * 4 + 64 * 4];
    const compressed = [
      ['allReduce', 'uncompressed', 32],
      ['allReduce', 'P', p],
      ['allReduce', 'Q', q],
    ];
    expect(log).toEqual([['allReduce', 'bucket', WIDE_N], ...compressed, ...compressed]);
    expect((await wide[0].report()).compressed_bytes).toBe((WIDE_N + 2 * (32 + p + q)) * 4);
    expect((await wide[0].report()).uncompressed_bytes).toBe(3 * WIDE_N * 4);
    // the checkpointed state is the real one's (the padding is not state)
    expect((await wide[0].state()).tensors.get('q.0')!.length).toBe((16 + 32) * 4);
  });

  it("PowerSGD's math on the device at the shape's FLOPs: P = M·Q at bucket ready, Q = Mᵀ·P done before Q is sent, M = P·Qᵀ after", async () => {
    const log: unknown[][] = [];
    let t = 0;
    const device: HookDevice = {
      enqueueFlops: (flops) => (log.push(['enqueue', flops]), ++t),
      reach: async (end) => void log.push(['reach', end]),
    };
    const pgs = simulatedGroups(2);
    const o = { ...POWERSGD_DEFAULTS, rank: 4, seed: 7, startIter: 1 };
    const hooks = [new PowerSgdHook(o, device), new PowerSgdHook(o, null)];
    const on = [logged(pgs[0], log), pgs[1]];
    await step(hooks, on, 0, WIDE);
    expect(log).toEqual([['allReduce', 'bucket', WIDE_N]]); // uncompressed steps do no math
    log.length = 0;
    await step(hooks, on, 1, WIDE);
    // Gram-Schmidt of an n x 4 matrix: 3·n·4 + 2·n·4·3 = 36n; each product 2·n·m·4
    const mm = 2 * 48 * 32 * 4 + 2 * 80 * 64 * 4;
    const ready = 2 * WIDE_N + 36 * 32 + 36 * 64 + mm; // x world size and + error memory, orthogonalize Q, P = M·Q
    const middle = 36 * 48 + 36 * 80 + mm + 32; // orthogonalize P, Q = Mᵀ·P, the 1-D tensors / world size
    const done = 32 * 4 + 64 * 4 + mm + WIDE_N; // Q / world size, M = P·Qᵀ, the new error memory
    expect(log).toEqual([
      ['enqueue', ready],
      ['allReduce', 'uncompressed', 32],
      ['allReduce', 'P', 48 * 4 + 80 * 4],
      ['enqueue', middle],
      ['reach', 2],
      ['allReduce', 'Q', 32 * 4 + 64 * 4],
      ['enqueue', done],
    ]);
  });
});

describe('--grad-compression values', () => {
  it('none|fp16|bf16|powersgd[:R]', () => {
    expect(parseGradCompression('fp16')).toEqual({ hook: 'fp16' });
    expect(parseGradCompression('powersgd')).toEqual({ hook: 'powersgd' });
    expect(parseGradCompression('powersgd:4')).toEqual({ hook: 'powersgd', matrix_approximation_rank: 4 });
    expect(parseGradCompression('fp16:4')).toBeNull();
    expect(parseGradCompression('powersgd:0')).toBeNull();
    expect(parseGradCompression('int8')).toBeNull();
  });

  it('are spelled back the same way (a checkpoint names the compression it was saved with)', () => {
    for (const t of ['none', 'fp16', 'bf16', 'powersgd:4']) expect(gradCompressionLabel(parseGradCompression(t)!)).toBe(t);
    expect(gradCompressionLabel({ hook: 'powersgd' })).toBe('powersgd:1');
    expect(gradCompressionLabel(undefined)).toBe('none');
  });
});
