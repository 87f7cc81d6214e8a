// Emulated devices (benchmarks only; the job field `emulate`, SHARDWISE_EMULATE: usage in
// workers/protocol/emulate.ts). Why: the ranks of a run here share 2 CPU cores and one software
// adapter, so N ranks compute slower than one, and no measurement shows N GPUs on a LAN.
//
// The design: every rank runs every real kernel (losses, gradients and bytes on the wire stay
// the real ones), but its *time* follows an emulated device:
//   - each layer's forward and backward, when the host records it, is also enqueued on an
//     in-order emulated queue (gpu/emulated-clock.ts) with the layer's emulated time
//     (emulate-times.ts: a stated TFLOP/s and the layer's FLOPs, or a profile measured on a GPU);
//   - every readback (Runtime.read, Runtime.sync) returns no earlier than the emulated queue
//     reaches the point where it was issued (and no earlier than the real kernels finished).
// DDP reads each gradient bucket as soon as its last layer's backward is recorded, so its
// all-reduce starts at that layer's emulated end and runs, for real, while the emulated device
// goes on with the earlier layers: overlap and exposed communication are measured as on a GPU.
// The real kernels of all ranks share the CPU meanwhile; as long as they finish before the
// emulated times, the ranks do not serialize, and a rank's step time is its emulated compute
// plus its exposed (real) communication. The compute spans the run reports are the emulated ones.
//
// Limits, stated in every output (`emulated` in the done message and the summary):
//   - where the real kernels come later than the emulated device (a too-fast emulated device, or
//     too many ranks on the cores) the real time governs; `real_bound_pct` says how often that
//     happened, and a run with a high figure measured the CPU, not the emulated device;
//   - host work (the collectives' reductions, copies, the step's JavaScript) is real and shares
//     the cores: it is what a real cluster pays on its hosts too, but here N ranks pay it on 2 cores;
//   - the optimizer step is timed only when the profile or `optimizer_ms` gives its time;
//   - with `shape`, the timing follows that shape while a proxy of the same depth computes; DDP
//     pads each gradient bucket so the bytes on the wire follow the shape too (zeros: the numbers
//     stay the proxy's). Its losses are the proxy's, not the shape's.
import { readFileSync } from 'node:fs';
import { type GptConfig, gptTensors } from '../../common/model-layout.js';
import { gptParamCount } from '../../common/model-params.js';
import { TABLE } from '../../common/strategies.js';
import type { ProcessGroup } from '../comm/index.js';
import { DeviceProfileSchema, type EmulatedReport, type EmulatedShape, type EmulateSpec } from '../protocol/emulate.js';
import type { TrainJob } from '../protocol/train.js';
import { EmulatedClock } from './emulated-clock.js';
import { emulatedDims, type LayerTimes, passTime, sustainedFlopsPerMs, timesFromProfile, timesFromTflops } from './emulated-times.js';
import type { ComputeSpan } from './gpu-timeline.js';
import { paddedAllReduce } from './padded-wire.js';
import type { Runtime } from './runtime.js';

/** The emulated shape's parameters (its gradient bytes) per parameter of the proxy that computes it (same positions). */
export function shapeBytesScale(shape: EmulatedShape, proxy: ProxyModel): number {
  return gptParamCount({ ...shape, block_size: proxy.block_size }, shape.vocab_size) / gptParamCount(proxy, proxy.vocab_size);
}

/** The sizes of the model that computes (heads do not change a layer's FLOPs). */
type ProxyModel = Omit<GptConfig, 'n_head'>;

export interface EmulationSetup {
  model: ProxyModel;
  /** micro-batch rows, sequence length, tensor-parallel size, activation checkpointing */
  B: number;
  T: number;
  tp: number;
  checkpointing: boolean;
}

/** The per-layer times of `spec` for this run (reads the profile file where the spec names one). */
export function layerTimesOf(spec: EmulateSpec, s: EmulationSetup): LayerTimes {
  if (spec.shape && spec.shape.n_layer !== s.model.n_layer)
    throw new Error(
      `emulate.shape ${spec.shape.name} has ${spec.shape.n_layer} layers but the model computing it has ${s.model.n_layer}; give the proxy model n_layer ${spec.shape.n_layer}`,
    );
  const dims = emulatedDims(s.model, spec.shape, s);
  if (spec.tflops !== undefined) return timesFromTflops(dims, spec.tflops, spec.overhead_ms, spec.optimizer_ms);
  let profile;
  try {
    profile = DeviceProfileSchema.parse(JSON.parse(readFileSync(spec.profile!, 'utf8')));
  } catch (e) {
    throw new Error(
      `emulate.profile ${spec.profile} is not a readable device profile (${(e as Error).message}); see DeviceProfileSchema in workers/protocol/emulate.ts`,
      { cause: e },
    );
  }
  return timesFromProfile(dims, profile, spec.overhead_ms, spec.optimizer_ms);
}

/** Each parameter's shape in the emulated model (the proxy's names; its block_size, as the proxy's wpe has). */
function shapeParamShapes(shape: EmulatedShape, proxy: { block_size: number }): ReadonlyMap<string, readonly number[]> {
  return new Map(gptTensors({ ...shape, block_size: proxy.block_size }).map((t) => [t.name, t.shape] as const));
}

/**
 * One rank's emulated device: its queue (installed on the runtime) and its compute spans. It is
 * the rank's StepClock (step-clock.ts): the engines tell it a step's events as they tell a real
 * device's, and never ask which they have.
 */
export class EmulatedDevice {
  readonly clock: EmulatedClock;
  /** every layer pass is marked: the device paces them */
  readonly marks = true;
  private readonly spans: ComputeSpan[] = [];
  private readonly stepMs: number[] = [];
  /** gradient bytes sent per real gradient byte (DDP with an emulated shape) */
  gradBytesScale = 1;
  /** DDP's buckets on the wire: a plain all-reduce padded to the shape's bytes; a hook times its math here and sends the shape's payloads */
  readonly gradients = {
    bucketGroup: (pg: ProcessGroup, hooked: boolean) => (hooked ? pg : paddedAllReduce(pg, this.gradBytesScale)),
    hook: { device: this as EmulatedDevice | null, wireShapes: undefined as ReadonlyMap<string, readonly number[]> | undefined },
  };
  /**
   * the device's sustained rate in FLOPs per ms (a block's forward FLOPs over its time, launch
   * overhead left out): what work outside the layers costs on it (enqueueFlops)
   */
  flopsPerMs = 0;

  constructor(
    rt: Runtime,
    readonly spec: EmulateSpec,
    readonly times: LayerTimes,
    private readonly keepSpans: boolean,
    clock = new EmulatedClock(),
  ) {
    this.clock = clock;
    rt.emulated = clock;
  }

  /** The work of `layer`'s pass has just been recorded: enqueue its emulated time. */
  mark(kind: 'forward' | 'backward', layer: string, micro: number) {
    const w = this.clock.enqueue(passTime(this.times, kind, layer));
    if (this.keepSpans) this.spans.push({ kind, layer, micro, ...w });
  }

  /**
   * Work outside the layers (a DDP communication hook's math: comm-hooks/hook.ts HookDevice)
   * enqueued now at the device's rate; returns when (epoch ms) it ends. It counts in the step's
   * device time but records no span (no layer).
   */
  enqueueFlops(flops: number): number {
    if (!(this.flopsPerMs > 0))
      throw new Error(
        `emulated device: no FLOP rate to time a communication hook's math (the profile's block forward takes no time); give emulate.tflops or a profile with block times`,
      );
    return this.clock.enqueue(flops / this.flopsPerMs).end;
  }

  /** Resolves once the device reaches `end` (an enqueueFlops result the host sends next). */
  reach(end: number): Promise<void> {
    return this.clock.wait(end);
  }

  /** Pace every layer pass of these models (a pipeline stage's activation slots) from their layer hooks. */
  follow(models: readonly { hooks: { afterForward?(l: { name: string }): void; afterBackward?(l: { name: string }): void } }[]) {
    for (const m of models) {
      m.hooks.afterForward = (l) => this.mark('forward', l.name, 0);
      m.hooks.afterBackward = (l) => this.mark('backward', l.name, 0);
    }
  }

  /** The optimizer step is about to be recorded. */
  optimizer() {
    if (this.times.optimizer <= 0) return;
    const w = this.clock.enqueue(this.times.optimizer);
    if (this.keepSpans) this.spans.push({ kind: 'optimizer', layer: 'optimizer', micro: 0, ...w });
  }

  /** A step begins: what was enqueued before (setup, eval) is not the step's. */
  beginStep() {
    this.clock.takeBusyMs();
  }

  /** The step's emulated compute spans (empty when spans are off); closes the step's device time. */
  async drain(): Promise<ComputeSpan[]> {
    this.stepMs.push(this.clock.takeBusyMs());
    return this.spans.splice(0);
  }

  /** what the done message adds: the device, its step time and how far its times held */
  summary(): { emulated?: EmulatedReport } {
    return { emulated: this.report() };
  }

  report(): EmulatedReport {
    const c = this.clock;
    return {
      device: this.times.device,
      ...(this.spec.shape ? { shape: this.spec.shape.name } : {}),
      device_ms_per_step: this.stepMs.length ? this.stepMs.reduce((a, b) => a + b, 0) / this.stepMs.length : 0,
      real_bound_pct: c.reads ? (100 * c.realBound) / c.reads : 0,
      ...(this.spec.shape ? { grad_bytes_scale: this.gradBytesScale } : {}),
    };
  }
}

/** The job's emulated device on this rank's runtime (null without `emulate`); `keepSpans`: for the spans messages. */
export function startEmulation(
  rt: Runtime,
  job: TrainJob,
  s: Omit<EmulationSetup, 'checkpointing'>,
  keepSpans = false,
): EmulatedDevice | null {
  const spec = job.emulate;
  if (!spec) return null;
  const strategy = job.parallel?.strategy ?? 'single';
  // the shape rides on DDP's buckets: a strategy that all-reduces them, or one rank that sends nothing
  if (spec.shape && !TABLE[strategy].bucketAllReduce && !TABLE[strategy].oneRank)
    throw new Error(
      `emulate.shape (${spec.shape.name}) sends the shape's bytes by padding DDP's gradient buckets; strategy ${strategy} would send the proxy's. Run --strategy ddp, or drop the shape`,
    );
  const setup = { ...s, checkpointing: job.train.activation_checkpointing };
  const times = layerTimesOf(spec, setup);
  const device = new EmulatedDevice(rt, spec, times, keepSpans);
  if (spec.shape) {
    device.gradBytesScale = shapeBytesScale(spec.shape, s.model);
    device.gradients.hook.wireShapes = shapeParamShapes(spec.shape, s.model);
  }
  device.flopsPerMs = sustainedFlopsPerMs(times, emulatedDims(s.model, spec.shape, setup), spec.overhead_ms);
  return device;
}
