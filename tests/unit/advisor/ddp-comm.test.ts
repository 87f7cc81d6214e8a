// The advisor's DDP bucket timeline (common/advisor/ddp-comm.ts) against the rank code it restates
// (workers/parallel/ddp.ts planBuckets, workers/comm-hooks/powersgd.ts planBucket), the timeline's
// overlap on hand-made cases, and the emulated device's compute against its own clock
// (workers/gpu/emulated-times.ts).
import { describe, expect, it } from 'vitest';
import { type DdpBucket, ddpBuckets, type DdpTimelineInput, ddpTimeline, powerSgdBucket } from '../../../common/advisor/ddp-comm.js';
import { predictStepTime, speedOfEmulated } from '../../../common/advisor/time.js';
import { type GptConfig, gptTensors } from '../../../common/model-layout.js';
import { gptParamCount } from '../../../common/model-params.js';
import { type HookBucket, planBucket } from '../../../workers/comm-hooks/index.js';
import type { GpuTensor } from '../../../workers/gpu/allocator.js';
import { blockForwardFlops, headForwardFlops } from '../../../workers/gpu/emulated-times.js';
import type { ParamRef } from '../../../workers/model/params.js';
import { planBuckets } from '../../../workers/parallel/ddp.js';

const TINY: Omit<GptConfig, 'n_head'> = { n_layer: 2, d_model: 64, block_size: 64, vocab_size: 27 };
const SMALL: Omit<GptConfig, 'n_head'> = { n_layer: 4, d_model: 128, block_size: 128, vocab_size: 27 };
/** bench:lan's GPT-2-medium shape and the 24-block tiny proxy that computes it */
const MEDIUM: GptConfig = { n_layer: 24, n_head: 16, d_model: 1024, block_size: 64, vocab_size: 50257 };
const PROXY: Omit<GptConfig, 'n_head'> = { n_layer: 24, d_model: 64, block_size: 64, vocab_size: 27 };
const CAPS = { bucket_cap_mb: 0.25, first_bucket_mb: 0.0625 };

/** The rank's ParamRefs of a model (fp32, slot-aligned in forward order, as ParamStore lays them out). */
function refsOf(m: Omit<GptConfig, 'n_head'>): ParamRef[] {
  let offset = 0;
  return gptTensors(m).map((t, index) => {
    const numel = t.rows * t.cols;
    const r = {
      index,
      name: t.name,
      shape: t.cols > 1 ? [t.rows, t.cols] : [t.rows],
      numel,
      offset,
      grad: {} as GpuTensor,
    } as unknown as ParamRef;
    offset += Math.max(64, Math.ceil(numel / 64) * 64);
    return r;
  });
}

/** The HookBucket DDP hands a hook for one of our buckets (wire shapes where a proxy computes). */
function hookBucketOf(b: DdpBucket, refs: ParamRef[], start: number, proxied: boolean): HookBucket {
  return {
    index: b.index,
    labels: {},
    tensors: b.tensors.map((t) => {
      const r = refs.find((x) => x.name === t.name)!;
      return {
        name: t.name,
        shape: r.shape,
        start: r.offset - start,
        numel: r.numel,
        ...(proxied ? { wire: t.wire.cols > 1 ? [t.wire.rows, t.wire.cols] : [t.wire.rows] } : {}),
      };
    }),
  };
}

describe('advisor: DDP buckets as the rank makes them', () => {
  for (const [name, m, caps] of [
    ['tiny, default caps', TINY, CAPS],
    ['small, default caps', SMALL, CAPS],
    ['small, 0.1 MiB cap', SMALL, { bucket_cap_mb: 0.1, first_bucket_mb: 0.01 }],
    ['small, one parameter per bucket', SMALL, { bucket_cap_mb: 0, first_bucket_mb: 0 }],
    ['the medium proxy', PROXY, CAPS],
  ] as const)
    it(`${name}: the same parameters and ranges as workers/parallel/ddp.ts planBuckets`, () => {
      const refs = refsOf(m);
      const rank = planBuckets(refs, { bucketCapBytes: caps.bucket_cap_mb * 2 ** 20, firstBucketBytes: caps.first_bucket_mb * 2 ** 20 });
      const ours = ddpBuckets(m, caps, 4);
      expect(ours.map((b) => b.tensors.map((t) => t.name).sort())).toEqual(rank.map((b) => b.params.map((p) => p.name).sort()));
      expect(ours.map((b) => b.elems)).toEqual(rank.map((b) => b.end - b.start));
      // buckets get ready in their order as backward walks the layers down; the last one holds the embeddings
      for (let i = 1; i < ours.length; i++) expect(ours[i]!.readyLayer).toBeLessThanOrEqual(ours[i - 1]!.readyLayer);
      expect(ours.at(-1)!.readyLayer).toBe(0);
    });

  it("an emulated shape: the proxy's buckets carry the shape's bytes (DDP's padding) and its tensors (a hook's payloads)", () => {
    const buckets = ddpBuckets(MEDIUM, { ...CAPS, proxy: PROXY }, 4);
    const scale = gptParamCount(MEDIUM, MEDIUM.vocab_size) / gptParamCount(PROXY, PROXY.vocab_size);
    for (const b of buckets) expect(b.plainWire).toBe(Math.round(b.elems * scale));
    const psi = gptParamCount(MEDIUM, MEDIUM.vocab_size);
    expect(buckets.reduce((a, b) => a + b.hookWire, 0)).toBe(psi);
    // padded to the shape: the bytes on the wire are the shape's, within the slots' padding of the proxy
    expect(buckets.reduce((a, b) => a + b.plainWire, 0) / psi).toBeCloseTo(1, 2);
  });
});

describe("advisor: PowerSGD's payloads and FLOPs as workers/comm-hooks/powersgd.ts planBucket", () => {
  for (const [name, m, proxied, rank] of [
    ['small, rank 4', SMALL, false, 4],
    ['tiny, rank 1', TINY, false, 1],
    ['the medium shape on its proxy, rank 4', PROXY, true, 4],
  ] as const)
    it(name, () => {
      const refs = refsOf(m);
      const buckets = proxied ? ddpBuckets(MEDIUM, { ...CAPS, proxy: PROXY }, 4) : ddpBuckets(m, CAPS, 4);
      const rankBuckets = planBuckets(refs, {
        bucketCapBytes: CAPS.bucket_cap_mb * 2 ** 20,
        firstBucketBytes: CAPS.first_bucket_mb * 2 ** 20,
      });
      for (const ef of [true, false])
        for (const b of buckets) {
          const plan = planBucket(hookBucketOf(b, refs, rankBuckets[b.index]!.start, proxied), rank, 2, { errorFeedback: ef });
          const ours = powerSgdBucket(b, { hook: 'powersgd', matrix_approximation_rank: rank, use_error_feedback: ef });
          expect({ plain: ours.plain, p: ours.p, q: ours.q }).toEqual({ plain: plan.wire.plain, p: plan.wire.p, q: plan.wire.q });
          expect(ours.flops).toEqual(plan.flops);
        }
    });
});

/** Two layers, one bucket each, 10 ms of backward per layer, links and copies as given. */
function twoBuckets(o: Partial<DdpTimelineInput> = {}): DdpTimelineInput {
  const t = (layer: number) => ({ name: `w${layer}`, layer, rows: 100, cols: 100, wire: { rows: 100, cols: 100 } });
  const b = (index: number, layer: number): DdpBucket => ({
    index,
    tensors: [t(layer)],
    readyLayer: layer,
    elems: 10_000,
    plainWire: 10_000,
    hookWire: 10_000,
  });
  return {
    buckets: [b(0, 1), b(1, 0)],
    E: 4,
    layers: [1, 0],
    layerMs: () => 10,
    hookMs: (f) => f / 1e6,
    allReduceMs: (bytes) => bytes / 8000, // 40 KB: 5 ms
    d2hMs: () => 0,
    h2dMs: () => 0,
    syncMs: 0,
    ...o,
  };
}

describe('advisor: the DDP bucket timeline', () => {
  it("a link faster than backward: the first bucket's all-reduce hides under the second layer, the last one is exposed", () => {
    const t = ddpTimeline(twoBuckets());
    expect(t.backward_ms).toBe(20);
    // bucket 0 ready at 10, on the link 10-15 (hidden); bucket 1 ready at 20, on the link 20-25
    expect(t.end_ms).toBe(25);
  });

  it('a link slower than backward: the all-reduces queue on it one after the other', () => {
    const t = ddpTimeline(twoBuckets({ allReduceMs: (bytes) => bytes / 2000, syncMs: 1 })); // 20 ms each
    // bucket 0 readback at 11, link 11-31; bucket 1 readback at 21, waits, link 31-51; the optimizer's readback 52
    expect(t.end_ms).toBe(52);
  });

  it('fp16/bf16 send 2 bytes per element', () => {
    const t = ddpTimeline(twoBuckets({ compression: { hook: 'fp16' }, allReduceMs: (bytes) => bytes / 1000 }));
    // 20 KB: 20 ms each; bucket 0 on the link 10-30, bucket 1 30-50
    expect(t.end_ms).toBe(50);
  });

  it("hosts slower than the link: each all-reduce takes its sums' time, (N-1)/N of the payload at the host's ns per element", () => {
    // world 2: 5 000 of each bucket's 10 000 elements summed per rank; 4 µs each in float32 = 20 ms, the link's 5 ms hidden under it
    const host = { float32: 4000, float16: 8000, bfloat16: 6000 };
    // bucket 0 ready at 10, sums 10-30; bucket 1 ready at 20, waits, 30-50
    expect(ddpTimeline(twoBuckets({ world: 2, host })).end_ms).toBe(50);
    // fp16 hook: 16-bit sums at 8 µs: 40 ms each (bucket 0 10-50, bucket 1 50-90); bf16's at 6 µs: 30 ms each
    expect(ddpTimeline(twoBuckets({ world: 2, host, compression: { hook: 'fp16' } })).end_ms).toBe(90);
    expect(ddpTimeline(twoBuckets({ world: 2, host, compression: { hook: 'bf16' } })).end_ms).toBe(70);
    // a mixed-precision run's own 16-bit gradients: at its format's rate
    expect(ddpTimeline(twoBuckets({ world: 2, host, E: 2, halfDtype: 'bfloat16' })).end_ms).toBe(70);
    // hosts faster than the link: the link's time, as without them
    const fast = { float32: 0.1, float16: 0.1, bfloat16: 0.1 };
    expect(ddpTimeline(twoBuckets({ world: 2, host: fast })).end_ms).toBe(ddpTimeline(twoBuckets()).end_ms);
  });

  it("PowerSGD: its first math right after the bucket's layer, the rest behind the whole backward, buckets one after another", () => {
    const g = { hook: 'powersgd' as const, matrix_approximation_rank: 2 };
    const input = twoBuckets({ compression: g, allReduceMs: () => 1 });
    const p = powerSgdBucket(input.buckets[0]!, g);
    const ms = (f: number) => f / 1e6;
    // device: layer 1 [0,10], ready0, layer 0, ready1: backward ends at 20 + 2 ready
    const backwardEnd = 20 + 2 * ms(p.flops.ready);
    const t = ddpTimeline(input);
    expect(t.backward_ms).toBe(20);
    expect(t.hook_device_ms).toBeCloseTo(2 * (ms(p.flops.ready) + ms(p.flops.middle) + ms(p.flops.done)), 9);
    const [mid, done] = [ms(p.flops.middle), ms(p.flops.done)];
    expect(p.plain).toBe(0); // 100 x 100 at rank 2 compresses: P's round only, then Q's
    // bucket 0: P on the link from its readback; its middle math waits for backward's end, then Q, then its last math
    const q0 = backwardEnd + mid + 1;
    const dev0 = q0 + done;
    // bucket 1: its P once bucket 0's hook returned (after Q), its middle behind bucket 0's last math
    const mid1 = Math.max(dev0, q0 + 1) + mid;
    expect(t.end_ms).toBeCloseTo(mid1 + 1 + done, 9);
  });
});

describe('advisor: an emulated device', () => {
  it("one step of GPT-2 medium's shape at 0.03 TFLOP/s is its clock's layer times (embedding none, 24 blocks, the head; backward twice forward)", () => {
    const psi = gptParamCount(MEDIUM, MEDIUM.vocab_size);
    const t = predictStepTime({
      model: MEDIUM,
      batch_size: 8,
      seq_len: 64,
      layout: { strategy: 'single', world: 1, micro_batches: 1 },
      devices: [speedOfEmulated(0.03)],
      link: { gbps: 0.125, latency_us: 100 },
      params: psi,
      rankParams: [psi],
    });
    const d = { B: 8, T: 64, C: 1024, V: 50257 };
    const clock = (3 * (24 * blockForwardFlops(d) + headForwardFlops(d))) / (0.03 * 1e9);
    expect(t.step_ms).toBeCloseTo(clock, 6);
    expect(t.comm_exposed_ms).toBe(0);
  });

  it("DDP at world 4 over 1 Gbit/s with its buckets: the link's tail beyond backward is exposed, PowerSGD's small payloads hide under it", () => {
    const psi = gptParamCount(MEDIUM, MEDIUM.vocab_size);
    const at = (compression?: { hook: 'powersgd'; matrix_approximation_rank: number }) =>
      predictStepTime({
        model: MEDIUM,
        batch_size: 8,
        seq_len: 64,
        layout: { strategy: 'ddp', world: 4, micro_batches: 1 },
        devices: Array.from({ length: 4 }, () => speedOfEmulated(0.03)),
        link: { gbps: 0.125, latency_us: 100 },
        params: psi,
        rankParams: Array<number>(4).fill(psi),
        ddp: { ...CAPS, proxy: PROXY, ...(compression ? { compression } : {}) },
      });
    const none = at();
    const psgd = at({ hook: 'powersgd', matrix_approximation_rank: 4 });
    const d = { B: 2, T: 64, C: 1024, V: 50257 };
    const [block, head] = [blockForwardFlops(d) / 3e7, headForwardFlops(d) / 3e7]; // ms at 0.03 TFLOP/s
    expect(none.compute_ms).toBeCloseTo(3 * (24 * block + head), 6);
    // a ring all-reduce at world 4 sends 2 x 3/4 of the (padded) buffer; no bucket is ready before the head's backward
    const linkMs = (1.5 * 4 * psi) / 0.125e6;
    expect(none.step_ms).toBeGreaterThan(24 * block + head + 2 * head + 0.99 * linkMs);
    expect(none.comm_exposed_ms).toBeGreaterThan(0.5 * linkMs);
    expect(psgd.comm_exposed_ms).toBeLessThan(0.01 * none.comm_exposed_ms);
    expect(psgd.compute_ms).toBeGreaterThan(none.compute_ms); // its math on the device
  });
});
