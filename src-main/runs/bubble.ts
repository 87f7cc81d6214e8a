// Pipeline bubble from the stages' compute spans: per step, the window runs from the first
// micro-batch's forward on any stage to the last backward on any stage (the pipeline flush);
// a stage's bubble is the share of that window it spent idle between its own work spans.
// The theory for p stages and m micro-batches is (p-1)/(m+p-1) under GPipe and 1F1B alike.
import { TABLE } from '../../common/strategies.js';
import type { ParallelSpec } from '../../workers/protocol/train.js';

interface WorkSpan {
  kind: string;
  stage?: number;
  start: number;
  end: number;
}

export class BubbleMeter {
  private readonly byStep = new Map<number, Map<number, WorkSpan[]>>();
  /** per stage, the bubble fraction of each finished step */
  private readonly fractions: number[][];
  private firstStep: number | null = null;

  constructor(private readonly stages: number) {
    this.fractions = Array.from({ length: stages }, () => []);
  }

  /** One rank's spans of one step (its compute spans carry the stage). */
  add(step: number, rank: number, spans: readonly WorkSpan[]) {
    this.firstStep ??= step;
    let ranks = this.byStep.get(step);
    if (!ranks) this.byStep.set(step, (ranks = new Map()));
    ranks.set(
      rank,
      spans.filter((s) => (s.kind === 'forward' || s.kind === 'backward') && s.stage !== undefined),
    );
    if (ranks.size < this.stages) return;
    this.byStep.delete(step);
    const all = [...ranks.values()].flat();
    if (all.length === 0) return;
    const start = Math.min(...all.map((s) => s.start));
    const end = Math.max(...all.map((s) => s.end));
    // the run's first step compiles every kernel: not a steady-state step
    if (step === this.firstStep) return;
    for (let s = 0; s < this.stages; s++) {
      const busy = all.filter((x) => x.stage === s).reduce((a, x) => a + (x.end - x.start), 0);
      this.fractions[s]!.push(1 - busy / (end - start));
    }
  }

  /** mean bubble fraction per stage over the measured steps (empty when none was measured) */
  measured(): number[] {
    if (this.fractions[0]!.length === 0) return [];
    return this.fractions.map((f) => f.reduce((a, b) => a + b, 0) / f.length);
  }
}

export { theoreticalBubble } from '../../workers/protocol/pipeline.js';

/** The meter of a run whose every rank is one pipeline stage (pp; a 3d grid of one replica and one shard), else null. */
export function bubbleMeterFor(par: ParallelSpec | undefined): BubbleMeter | null {
  if (!par) return null;
  const s = TABLE[par.strategy];
  return s.pipelined && s.grid(par).pp === par.world ? new BubbleMeter(par.world) : null;
}
