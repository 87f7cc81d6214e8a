// The device's side of a training step. Both engines tell it the step's events the same way on
// every device: a step begins, a layer pass has been recorded, the optimizer step comes next, the
// step's compute spans are wanted; and they send DDP's gradient buckets through the group it
// gives. A real adapter measures the layer spans when they are wanted (gpu-timeline.ts) and has
// nothing else to do. An emulated device (benchmarks: emulated-device.ts) also paces every
// readback to its own times and, for an emulated shape, pads the buckets to that shape's bytes.
// The engines never ask which one they have.
import type { ProcessGroup } from '../comm/index.js';
import type { EmulatedReport } from '../protocol/emulate.js';
import type { TrainJob } from '../protocol/train.js';
import { type EmulationSetup, startEmulation } from './emulated-device.js';
import { type ComputeSpan, GpuTimeline } from './gpu-timeline.js';
import type { Runtime } from './runtime.js';

/** A model's layer hooks (workers/model/gpt.ts), as far as the clock follows them. */
export interface LayerHooks {
  hooks: { afterForward?(l: { name: string }): void; afterBackward?(l: { name: string }): void };
}

/** How DDP's gradient buckets go on the wire. */
export interface GradientWire {
  /** the group the buckets' collectives go through (`hooked`: a communication hook sends its own payloads) */
  bucketGroup(pg: ProcessGroup, hooked: boolean): ProcessGroup;
  /** what a communication hook is given (comm-hooks/index.ts HookPlace) */
  hook: {
    /** where its math is timed (comm-hooks/hook.ts HookDevice); null: it takes its real time */
    device: { enqueueFlops(flops: number): number; reach(end: number): Promise<void> } | null;
    /** each parameter's shape on the wire, by name, where it is not the model's own */
    wireShapes?: ReadonlyMap<string, readonly number[]>;
  };
}

export interface StepClock {
  /** whether the engine marks every layer pass (spans wanted, or a device that paces them) */
  readonly marks: boolean;
  /** `layer`'s pass has just been recorded */
  mark(kind: 'forward' | 'backward', layer: string, micro: number): void;
  /** follow these models' layer passes without keeping spans (a pipeline stage measures its own) */
  follow(models: readonly LayerHooks[]): void;
  /** a step begins: what was recorded before it (setup, evaluation) is not the step's */
  beginStep(): void;
  /** the optimizer step is about to be recorded */
  optimizer(): void;
  /** the step's compute spans (empty where none are kept); it closes the step */
  drain(): Promise<ComputeSpan[]>;
  /** what the run's done message adds */
  summary(): { emulated?: EmulatedReport };
  readonly gradients: GradientWire;
}

/** A real adapter's clock: its spans when they are wanted, nothing else. */
class AdapterClock implements StepClock {
  readonly gradients: GradientWire = { bucketGroup: (pg) => pg, hook: { device: null } };

  constructor(private readonly timeline: GpuTimeline | null) {}

  get marks() {
    return this.timeline !== null;
  }
  mark(kind: 'forward' | 'backward', layer: string, micro: number) {
    this.timeline?.mark(kind, layer, micro);
  }
  follow() {}
  beginStep() {}
  optimizer() {}
  async drain() {
    return (await this.timeline?.drain()) ?? [];
  }
  summary() {
    return {};
  }
}

/**
 * The clock of this rank's device for the job: the emulated device the job names (benchmarks),
 * else the adapter's, measuring layer spans where `spans` asks.
 */
export function stepClock(rt: Runtime, job: TrainJob, setup: Omit<EmulationSetup, 'checkpointing'>, spans: boolean): StepClock {
  return startEmulation(rt, job, setup, spans) ?? new AdapterClock(spans ? new GpuTimeline(rt) : null);
}
