// What each rank of a run is: the machine and device it runs on, its cell of the DP x TP x PP
// grid (model-layout.ts gridCoords, Megatron's order tp-dp-pp), the layers it holds and its
// device memory. Shared by the run view's topology panel, the memory charts' subtitles and the
// report's summary. Pure: reads a run's config, state, summary and step metrics.
//
// Layers come from the summary's `stages` (what the pipeline really split, measured partitions
// included) once the run ended; before that they are predicted from the config with the same
// parameter-balanced split the pipeline uses (stageRanges), or left open when the split is by
// measured time (parallel.partition = "time").
import { MEMORY_CATEGORIES } from './memory-categories.js';
import { type GptConfig, gridCoords, type GridShape, stageRanges } from './model-layout.js';
import { vocabFromParams } from './model-state.js';
import { strategyOf } from './strategies.js';

export interface TopologyInput {
  config: {
    parallel?: {
      strategy?: string;
      world?: number;
      dp?: number;
      tp?: number;
      pp?: number;
      micro_batches?: number;
      schedule?: string;
      partition?: string;
    };
    model?: Partial<Omit<GptConfig, 'vocab_size'>>;
    /** the adapter every rank asked for (--adapter), when no placement names one */
    device?: { adapter?: string };
  } & Record<string, unknown>;
  /** state.json: placement (launch), ranks (where each started) and Ψ once known */
  state?: {
    placement?: readonly { machine: string; device?: string }[];
    ranks?: readonly { rank: number; machine: string }[];
    params?: number;
    /** the dataset's vocabulary (before any padding), once known */
    vocab_size?: number;
  } | null;
  /** summary.json: stages (the real split), peak_bytes, params */
  summary?: Record<string, any> | null;
  /** step metrics with memory per rank */
  steps: readonly { memory?: Record<string, Record<string, number>> }[];
  /** device memory per rank in bytes, where the device reports it */
  deviceBytes?: Readonly<Record<number, number>>;
}

export interface RankRole {
  rank: number;
  machine: string;
  device: string;
  /** pipeline stage, null without a pipeline */
  stage: number | null;
  /** tensor-parallel shard, null without TP */
  tp: number | null;
  /** data-parallel replica, null without data parallelism */
  dp: number | null;
  /** what the rank holds: "embedding, block 0" ... */
  layers: string;
  /** whether `layers` is what the run split (summary) or a prediction from the config */
  layersFrom: 'run' | 'config';
  /** largest sampled device total (or the summary's peak) */
  peakBytes: number | null;
  /** the last sampled device total */
  latestBytes: number | null;
  /** the device's memory, when it reports it */
  deviceBytes: number | null;
}

/** The DP x TP x PP grid of a run's ranks, as the strategy table (strategies.ts) lays it out. */
export function runGrid(parallel: TopologyInput['config']['parallel']): GridShape {
  const world = parallel?.world ?? 1;
  const s = strategyOf(parallel?.strategy ?? 'single');
  if (!s) return { dp: world, tp: 1, pp: 1 };
  const { tp, pp, dp } = parallel ?? {};
  return s.grid({ world, ...(tp !== undefined ? { tp } : {}), ...(pp !== undefined ? { pp } : {}), ...(dp !== undefined ? { dp } : {}) });
}

/** "3d: DP 2 × TP 2 × PP 2 · 1f1b, 2 micro-batches" — the strategy and its grid in one line. */
export function strategyLine(parallel: TopologyInput['config']['parallel']): string {
  const strategy = parallel?.strategy ?? 'single';
  const world = parallel?.world ?? 1;
  const s = strategyOf(strategy);
  const g = runGrid(parallel);
  const grid = s ? s.label({ ...parallel, world, ...g }, 'grid') : `${world} ranks`;
  if (grid === null) return 'single device';
  const extra: string[] = [];
  if (g.pp > 1) extra.push(`${parallel?.schedule ?? '1f1b'}, ${parallel?.micro_batches ?? 1} micro-batches`);
  return `${strategy}: ${grid}${extra.length ? ` · ${extra.join(', ')}` : ''}`;
}

const blocks = (from: number, to: number) => (to - from === 1 ? `block ${from}` : `blocks ${from}–${to - 1}`);

function stageLayers(from: number, to: number, first: boolean, last: boolean): string {
  return [first ? 'embedding' : '', blocks(from, to), last ? 'ln_f + LM head' : ''].filter(Boolean).join(', ');
}

/** Sampled device totals of one rank, in step order. */
function totals(rank: number, steps: TopologyInput['steps']): number[] {
  const key = String(rank);
  return steps.flatMap((s) => {
    const b = s.memory?.[key];
    return b ? [MEMORY_CATEGORIES.reduce((t, c) => t + (b[c] ?? 0), 0)] : [];
  });
}

/** One row per rank of the run, rank order. */
export function rankRoles(run: TopologyInput): RankRole[] {
  const par = run.config.parallel ?? {};
  const strategy = par.strategy ?? 'single';
  const world = par.world ?? 1;
  const grid = runGrid(par);
  const m = run.config.model ?? {};
  const realStages = new Map<number, { index: number; from: number; to: number }>();
  for (const s of (run.summary?.stages ?? []) as { rank: number; index: number; from: number; to: number }[]) realStages.set(s.rank, s);
  const predicted = predictStages(run, grid);
  const placedOn = new Map((run.state?.ranks ?? []).map((r) => [r.rank, r.machine]));
  return Array.from({ length: world }, (_, rank) => {
    const c = gridCoords(grid, rank);
    const placement = run.state?.placement?.[rank];
    const machine = placedOn.get(rank) ?? (placement && placement.machine !== 'local' ? placement.machine : 'this machine');
    let layers: string;
    let layersFrom: RankRole['layersFrom'] = 'config';
    const real = realStages.get(rank);
    if (real) {
      layers = stageLayers(real.from, real.to, real.index === 0, real.index === grid.pp - 1);
      layersFrom = 'run';
    } else if (grid.pp > 1) {
      const s = predicted?.[c.pp];
      const why = par.partition === 'time' ? 'split by measured time: known at the end' : 'known once the model is built';
      layers = s ? stageLayers(s.from, s.to, s.first, s.last) : `stage ${c.pp} of ${grid.pp}'s blocks (${why})`;
    } else layers = m.n_layer ? stageLayers(0, m.n_layer, true, true) : 'the whole model';
    if (grid.tp > 1 && m.n_head) {
      const h = m.n_head / grid.tp;
      layers += ` · heads ${h === 1 ? c.tp * h : `${c.tp * h}–${(c.tp + 1) * h - 1}`} of ${m.n_head}, 1/${grid.tp} of the MLP and vocabulary`;
    }
    if (strategyOf(strategy)?.zeroStage === 3) layers += ` · 1/${world} of every parameter between uses (ZeRO-3)`;
    const ts = totals(rank, run.steps);
    const summaryPeak = run.summary?.peak_bytes?.[String(rank)]?.total;
    const sampledPeak = ts.length ? Math.max(...ts) : null;
    return {
      rank,
      machine,
      device: placement?.device ?? run.config.device?.adapter ?? 'default adapter',
      stage: grid.pp > 1 ? c.pp : null,
      tp: grid.tp > 1 ? c.tp : null,
      dp: grid.dp > 1 ? c.dp : null,
      layers,
      layersFrom,
      peakBytes: typeof summaryPeak === 'number' ? summaryPeak : sampledPeak,
      latestBytes: ts.length ? ts.at(-1)! : null,
      deviceBytes: run.deviceBytes?.[rank] ?? null,
    };
  });
}

/** The parameter-balanced stage split of the config; null when it cannot be predicted (time split, unknown sizes). */
function predictStages(run: TopologyInput, grid: GridShape) {
  const par = run.config.parallel ?? {};
  const m = run.config.model ?? {};
  if (grid.pp < 2 || par.partition === 'time' || !m.n_layer || !m.d_model || !m.block_size) return null;
  const params = typeof run.summary?.params === 'number' ? run.summary.params : run.state?.params;
  const sizes = { n_layer: m.n_layer, d_model: m.d_model, block_size: m.block_size };
  const vocab = typeof params === 'number' ? vocabFromParams(sizes, par.strategy ?? 'single', grid.tp, params) : null;
  return vocab === null ? null : stageRanges({ ...sizes, vocab_size: vocab }, grid.pp);
}

/** "stage 1 · TP 0 · DP 1": the rank's cell of the grid, the axes the run has. */
export function roleLabel(r: RankRole): string {
  return (
    [r.stage !== null ? `stage ${r.stage}` : '', r.tp !== null ? `TP ${r.tp}` : '', r.dp !== null ? `DP ${r.dp}` : '']
      .filter(Boolean)
      .join(' · ') || 'whole model'
  );
}
