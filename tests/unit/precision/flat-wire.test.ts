// The data-parallel strategies' collectives over flat ranges (workers/precision/flat-wire.ts), over
// two simulated in-process ranks: at fp32 the group gets the strategy's own arrays with the
// element counts of each rank's block and no dtype (what the strategies passed before), at bf16
// the parameters' 16-bit bits without the slots' padding, with the packed counts, and each rank
// gets its block back in the flat layout with the padding zero. And ZeRO-Offload's host shard
// optimizer (workers/optim/host-shard.ts): fp16's skip, the loss scale divided out exactly.
import { describe, expect, it } from 'vitest';
import { bfloat16ToFloat, floatToBfloat16, type ProcessGroup } from '../../../workers/comm/index.js';
import type { Runtime } from '../../../workers/gpu/runtime.js';
import { decayMask, HostShardOptimizer } from '../../../workers/optim/host-shard.js';
import { type Flat, FlatWire } from '../../../workers/precision/flat-wire.js';

// three tensors in 128-element slots (a 16-bit store's): 200 (slots 0-1), 64 (slot 2), 130 (slots 3-4)
const refs = [
  { offset: 0, numel: 200 },
  { offset: 256, numel: 64 },
  { offset: 384, numel: 130 },
];
const F = 640;
const BOUNDS = [0, 384, 640]; // two ranks' shards, 256-byte aligned at 16 bits
const isParam = (i: number) => refs.some((r) => i >= r.offset && i < r.offset + r.numel);

interface Call {
  op: string;
  input: Flat;
  counts: readonly number[];
  dtype?: string;
}

/** Two ranks whose reduceScatter / allGather calls meet in call order; sums exact in float64, rounded to the payload's type. */
function simulatedPair(): { groups: ProcessGroup[]; calls: Call[][] } {
  const calls: Call[][] = [[], []];
  const met: { inputs: Flat[]; done: ((r: Flat) => void)[]; op: string; counts: readonly number[] }[] = [];
  const widen = (x: Flat, i: number) => (x instanceof Float32Array ? x[i]! : bfloat16ToFloat(x[i]!));
  const make = (x: Flat, n: number) => (x instanceof Float32Array ? new Float32Array(n) : new Uint16Array(n));
  const groups = [0, 1].map((rank) => {
    let seq = 0;
    const post = (op: string, input: Flat, o: { counts: readonly number[]; dtype?: string }) => {
      calls[rank]!.push({ op, input, counts: o.counts, ...('dtype' in o ? { dtype: o.dtype } : {}) });
      const m = (met[seq++] ??= { inputs: [], done: [], op, counts: o.counts });
      return {
        wait: () =>
          new Promise<Flat>((resolve) => {
            m.inputs[rank] = input;
            m.done[rank] = resolve;
            if (m.done.filter(Boolean).length < 2) return;
            const starts = [0, m.counts[0]!, m.counts[0]! + m.counts[1]!];
            if (m.op === 'reduceScatter') {
              for (const r of [0, 1]) {
                const out = make(input, m.counts[r]!);
                for (let i = 0; i < out.length; i++) {
                  const sum = widen(m.inputs[0]!, starts[r]! + i) + widen(m.inputs[1]!, starts[r]! + i);
                  out[i] = out instanceof Float32Array ? sum : floatToBfloat16(sum);
                }
                m.done[r]!(out);
              }
            } else {
              const out = make(input, starts[2]!);
              for (const r of [0, 1]) out.set(m.inputs[r]!, starts[r]!);
              for (const r of [0, 1]) m.done[r]!(out.slice());
            }
          }),
      };
    };
    return {
      rank,
      size: 2,
      reduceScatter: (input: Flat, o: { counts: readonly number[]; dtype?: string }) => post('reduceScatter', input, o),
      allGather: (input: Flat, o: { counts: readonly number[]; dtype?: string }) => post('allGather', input, o),
    } as unknown as ProcessGroup;
  });
  return { groups, calls };
}

const noDevice = null as unknown as Runtime; // the collectives never touch the device
const wires = { fp32: new FlatWire(noDevice, { precision: 'fp32', refs }), bf16: new FlatWire(noDevice, { precision: 'bf16', refs }) };
/** rank r's flat gradients: element i holds (r + 1) * (i % 7 + 1) on a parameter, 0 on padding (small integers: exact in bf16) */
const flatOf = (wire: FlatWire, r: number) =>
  wire.narrow(Float32Array.from({ length: F }, (_, i) => (isParam(i) ? (r + 1) * ((i % 7) + 1) : 0)));

describe('FlatWire', () => {
  it('fp32: the group gets the very arrays with each block element count (384 and 256) and no dtype; bf16: the 394 parameter elements, 264 and 130, as bfloat16', async () => {
    for (const [p, wire] of Object.entries(wires)) {
      const { groups, calls } = simulatedPair();
      const data = [0, 1].map((r) => flatOf(wire, r));
      const mine = await Promise.all([0, 1].map((r) => wire.reduceScatter(groups[r]!, data[r]!, 0, F, BOUNDS, { what: 'gradients' })));
      for (const r of [0, 1]) {
        const call = calls[r]![0]!;
        if (p === 'fp32') {
          expect(call.input, 'fp32 passes the strategy its own array').toBe(data[r]);
          expect(call.counts).toEqual([384, 256]);
          expect('dtype' in call, 'fp32 adds no dtype').toBe(false);
        } else {
          expect(call.input.length).toBe(200 + 64 + 130);
          expect(call.counts).toEqual([200 + 64, 130]);
          expect(call.dtype).toBe('bfloat16');
        }
        // the block back in the flat layout: the two ranks' sum (3x rank 0's) on parameters, zero on padding
        const [lo, hi] = [BOUNDS[r]!, BOUNDS[r + 1]!];
        const got = wire.widen(mine[r]!);
        expect(got.length).toBe(hi - lo);
        for (let i = lo; i < hi; i++) expect(got[i - lo], `${p} element ${i}`).toBe(isParam(i) ? 3 * ((i % 7) + 1) : 0);
      }
    }
  });

  it('a range crossing the shard bound, [256, 514): each rank gathers the whole range from its part (fp32 counts 128 and 130, bf16 64 and 130)', async () => {
    for (const [p, wire] of Object.entries(wires)) {
      const { groups, calls } = simulatedPair();
      const whole = flatOf(wire, 0);
      const own = [whole.slice(256, 384), whole.slice(384, 514)];
      const got = await Promise.all([0, 1].map((r) => wire.allGather(groups[r]!, own[r]!, 256, 514, BOUNDS, { what: 'weights' })));
      expect(calls[0]![0]!.counts).toEqual(p === 'fp32' ? [128, 130] : [64, 130]);
      for (const r of [0, 1])
        expect(Array.from(wire.widen(got[r]!)), `${p} rank ${r}`).toEqual(Array.from(wire.widen(whole.slice(256, 514))));
    }
  });

  it('counts, widen and narrow: fp32 leaves arrays as they are, bf16 rounds to nearest even', () => {
    const x = Float32Array.of(1, 1 + 2 ** -9, 3);
    expect(wires.fp32.narrow(x)).toBe(x);
    expect(wires.fp32.widen(x)).toBe(x);
    expect(Array.from(wires.bf16.widen(wires.bf16.narrow(x)))).toEqual([1, 1, 3]);
    expect([wires.fp32.count(200, 300), wires.bf16.count(200, 300)]).toEqual([100, 44]);
    expect(wires.bf16.counts(0, F, BOUNDS)).toEqual([264, 130]);
  });
});

describe('HostShardOptimizer (ZeRO-Offload)', () => {
  const config = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 };
  const sumOf = (ranks: number) => async (x: number) => Math.fround(x * ranks); // the other ranks' squares equal this one's

  it('decays only the elements of decaying parameters inside the shard', () => {
    const specs = [
      { offset: 0, numel: 4, spec: { decay: true } },
      { offset: 64, numel: 2, spec: { decay: false } },
      { offset: 128, numel: 3, spec: { decay: true } },
    ];
    expect(Array.from(decayMask(specs, 2, 131))).toEqual([1, 1, ...new Array(124).fill(0), 1, 1, 1]);
  });

  it('gradients carrying a loss scale of 2^12 update exactly as unscaled ones; the norm is unscaled', async () => {
    const master = Float32Array.of(0.5, -0.25, 1, 2);
    const g = Float32Array.of(0.1, -0.2, 0.3, 0.05);
    const a = new HostShardOptimizer(config, Uint8Array.of(1, 0, 1, 1), false);
    const b = new HostShardOptimizer(config, Uint8Array.of(1, 0, 1, 1), false);
    a.start(master);
    b.start(master);
    const plain = await a.update(g.slice(), 1e-2, 1, sumOf(2));
    const scaled = await b.update(
      g.map((x) => x * 4096),
      1e-2,
      4096,
      sumOf(2),
    );
    expect(Array.from(scaled.weights)).toEqual(Array.from(plain.weights));
    expect(scaled.norm).toBe(plain.norm);
    expect(plain.weights[0]).not.toBe(0.5);
  });

  it('fp16: an inf norm skips the update (weights, moments and step unchanged); a checkpoint loaded before setup applies at start', async () => {
    const opt = new HostShardOptimizer(config, Uint8Array.of(1, 1), true);
    opt.load(Float32Array.of(0.1, 0.2), Float32Array.of(0.3, 0.4), 7);
    opt.start(Float32Array.of(1, 2));
    const r = await opt.update(Float32Array.of(Infinity, 1), 1e-2, 2, sumOf(1));
    expect(r.norm).toBe(Infinity);
    const s = opt.state();
    expect([Array.from(r.weights), Array.from(s.m), Array.from(s.v), s.step]).toEqual([
      [1, 2],
      [Math.fround(0.1), Math.fround(0.2)],
      [Math.fround(0.3), Math.fround(0.4)],
      7,
    ]);
  });
});
