// A layer's prepared work in recording order: kernel launches and buffer copies for the
// runtime, and the tensor-parallel collectives the model awaits between them. Built once at
// construction, recorded every step. Consecutive launches merge into one list, so work without
// collectives (a group of one rank) records exactly the commands a hand-written sequence of
// rt.copy / rt.run calls would.
import type { GpuTensor } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';

/** a layer's forward in the step, or again in backward (activation checkpointing): collectives label their spans with it */
export type Pass = 'forward' | 'recompute';

type Step = { run: Dispatch[] } | { copy: readonly [GpuTensor, GpuTensor] } | { collective: (pass: Pass) => Promise<void> };

/** A layer's forward and backward. */
export interface LayerCommands {
  forward: CommandList;
  backward: CommandList;
}

export class CommandList {
  private readonly steps: Step[] = [];

  run(d: readonly Dispatch[]): this {
    const last = this.steps.at(-1);
    if (last && 'run' in last) last.run.push(...d);
    else if (d.length > 0) this.steps.push({ run: [...d] });
    return this;
  }

  /** dst = src (same byte length) */
  copy(src: GpuTensor, dst: GpuTensor): this {
    this.steps.push({ copy: [src, dst] });
    return this;
  }

  collective(c: (pass: Pass) => Promise<void>): this {
    this.steps.push({ collective: c });
    return this;
  }

  /** append another work's steps (it is left unchanged) */
  append(w: CommandList): this {
    for (const s of w.steps) {
      if ('run' in s) this.run(s.run);
      else this.steps.push(s);
    }
    return this;
  }

  async record(rt: Runtime, pass: Pass = 'forward'): Promise<void> {
    for (const s of this.steps) {
      if ('run' in s) rt.run(s.run);
      else if ('copy' in s) rt.copy(s.copy[0], s.copy[1]);
      else await s.collective(pass);
    }
  }
}
