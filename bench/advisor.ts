// npm run bench:advisor — the advisor's predictions against real runs on this machine. For each
// preset (tiny, small) it asks the advisor for this machine's layouts (--devices ranks on its
// adapters), runs each listed layout for a few steps and compares:
//   time    predicted step time against the measured one (the median of the steps after the
//           first), the median absolute error over the layouts (target <= 25%), and whether the
//           advisor's first choice is within 10% of the fastest layout measured (the first
//           choice and the three fastest run BENCH_AGAIN (2) more times, round after round,
//           judged on all their runs' steps: `runs`)
//   memory  every rank's predicted bytes per category against the rank's measured peaks (the
//           largest relative error per layout; target <= 5%, model states exact)
// Speeds: the stored machine profile where `shardwise profile` made one (SHARDWISE_HOME), else
// the defaults; calibrated by the preset's single-rank runs (a short one first, then the
// layout's own row): their median measured step time over their prediction scales every kernel
// and launch time (said in `calibration`). The predictions compared are the calibrated ones.
// Drift: this VM's speed drifts with its host's load (the same small step took 2.1 s and 4.4 s a
// quarter hour apart, nothing else running here), so every run is bracketed by a speed gauge
// (advisor-gauge.ts: one pass over a step's kernels in this process): `speed_factor` is the gauge
// during a run over the gauge during the calibration runs. The targets above are judged as stated
// (`error`, `median_abs_error`, `first_choice_within_10pct`: the prediction against
// the raw measurement); the `..._drift_corrected` figures scale each row's prediction by its
// speed factor (and judge the first choice on measured times divided by it), to show how much of
// the error is the machine's drift rather than the model.
// Prints one JSON object. BENCH_PRESETS=tiny (comma list), BENCH_STEPS (default 5), BENCH_DEVICES
// (default 2), BENCH_MAX_LAYOUTS (the first N of each list; default all), BENCH_CKPT=0 leaves out
// the activation-checkpointing variants, BENCH_AGAIN (default 2) the extra runs of the first choice
// and the three fastest, BENCH_SHARING=kernel|none plans with the profile's
// per-kernel sharing figures only, or none (default: its whole-step figures where it has them).
//
// `--from FILE` runs nothing: it takes an earlier bench:advisor JSON and predicts its rows again
// with this build's cost model and speeds (calibrated the same way, by the file's single-rank
// measurements): the same output, `from` naming the file. For checking a change of the cost
// model or of the profile against measurements taken on a quiet machine: the speeds are the
// profile stored now (its kernel times, launch costs and sharing speedups), not those the file
// was measured with. Both modes say on stderr which profile they use, and `calibration` keeps it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { layoutName } from '../common/advisor/layouts.js';
import { DEFAULT_DEVICE_SPEED } from '../common/advisor/time.js';
import type { AdviseResult, LayoutPlan } from '../common/advisor/types.js';
import { DevicesViewSchema } from '../common/api/index.js';
import { MEMORY_CATEGORIES } from '../common/memory-categories.js';
import { type StrategyName, TABLE } from '../common/strategies.js';
import { collectDevices } from '../src-main/machine/devices.js';
import { type MachineProfile, STEP_SHARE_OP } from '../common/advisor/profile.js';
import { loadMachineProfile, profilePath } from '../src-main/machine/profile-store.js';
import { SpeedGauge } from './advisor-gauge.js';
import { trainJson } from './run-and-read.js';
import { median } from '../common/stats.js';
import { adviseRequest } from '../src-main/controller/advise.js';
import { BUILTIN_VOCAB } from '../workers/protocol/builtin-vocab.js';
import { PRESETS } from '../workers/protocol/presets.js';

const presets = (process.env.BENCH_PRESETS ?? 'tiny,small').split(',').filter(Boolean);
const steps = Number(process.env.BENCH_STEPS ?? 5);
const devices = Number(process.env.BENCH_DEVICES ?? 2);
const maxLayouts = Number(process.env.BENCH_MAX_LAYOUTS ?? Infinity);
const withCkpt = process.env.BENCH_CKPT !== '0';
const again = Number(process.env.BENCH_AGAIN ?? 2);
const BATCH = 8;
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-advisor-'));

interface Measured {
  step_ms: number;
  peak_bytes: Record<string, Record<string, number>>;
  /** the speed gauge's reading around the run (the mean of before and after), ms */
  gauge_ms?: number;
  /** every step time after the first, of every run of the layout */
  steps_ms: number[];
  runs: number;
}

/** two runs of one layout as one: the median over all their steps, the gauge's mean */
const merged = (a: Measured, b: Measured): Measured => {
  const steps_ms = [...a.steps_ms, ...b.steps_ms];
  return {
    step_ms: median(steps_ms),
    steps_ms,
    peak_bytes: b.peak_bytes,
    gauge_ms: (a.gauge_ms! * a.runs + b.gauge_ms! * b.runs) / (a.runs + b.runs),
    runs: a.runs + b.runs,
  };
};

/** `run` bracketed by two readings of the gauge */
async function gauged(g: SpeedGauge, name: string, launch: LayoutPlan['launch']): Promise<Measured> {
  const before = await g.read();
  const m = await run(name, launch);
  return { ...m, gauge_ms: (before + (await g.read())) / 2 };
}

/** runs so far: each run's output folder is its own (a layout runs more than once) */
let runs = 0;

/** `train --json` of a launch config for `steps` steps: the median step time after the first, and the ranks' peaks. */
async function run(name: string, launch: LayoutPlan['launch']): Promise<Measured> {
  const args = ['--preset', launch.preset!, '--steps', String(steps), '--batch-size', String(BATCH)];
  const out = path.join(root, `${++runs}-${name.replace(/[^A-Za-z0-9]+/g, '-')}`);
  args.push('--eval-interval', '0', '--checkpoint-interval', '0', '--out', out);
  args.push('--strategy', launch.strategy!, '--micro-batches', String(launch.micro_batches));
  // the grid knobs the strategy table says this strategy takes
  for (const k of ['world', 'tp', 'pp', 'dp'] as const)
    if (TABLE[launch.strategy as StrategyName].knobs.has(k) && launch[k] !== undefined) args.push(`--${k}`, String(launch[k]));
  if (launch.schedule) args.push('--schedule', launch.schedule);
  if (launch.offload_optimizer === 'cpu') args.push('--offload-optimizer', 'cpu');
  if (launch.activation_checkpointing) args.push('--activation-checkpointing');
  const r = await trainJson(name, args);
  const ms = r.steps.filter((l) => l.step > 1).map((l) => l.step_ms as number);
  return { step_ms: median(ms), steps_ms: ms, peak_bytes: r.summary.peak_bytes, runs: 1 };
}

async function plan(preset: string, profile: MachineProfile | null, ranks = devices): Promise<AdviseResult> {
  const p = PRESETS[preset]!;
  // the runs below train on builtin:grammar: plan its vocabulary, not the assumed one
  const model = {
    n_layer: p.n_layer,
    n_head: p.n_head,
    d_model: p.d_model,
    block_size: p.block_size,
    vocab_size: BUILTIN_VOCAB['builtin:grammar'],
  };
  return adviseRequest(
    { preset, model, batch_size: BATCH, seq_len: p.block_size, devices: ranks },
    {
      devices: async () => DevicesViewSchema.parse({ ...(await collectDevices()), probed_at: new Date().toISOString() }),
      profile: () => Promise.resolve(profile),
    },
  );
}

/**
 * The profile's (or the defaults') speeds with every kernel and launch time scaled by f: what the
 * measured single-rank steps say of this machine now against the speeds (the defaults were taken
 * on another machine, or a profile under another load).
 */
function scaled(p: MachineProfile | null, f: number): MachineProfile {
  const d = DEFAULT_DEVICE_SPEED;
  const adapters = p?.adapters.length
    ? p.adapters
    : [
        {
          index: 0,
          name: 'defaults',
          backend: 'defaults',
          kernels: d.kernels.map((k) => ({ ...k, shape: 'default' })),
          h2d_gbps: d.h2d_gbps,
          d2h_gbps: d.d2h_gbps,
          ...(d.launch_ms !== undefined ? { launch_ms: d.launch_ms } : {}),
          ...(d.sync_ms !== undefined ? { sync_ms: d.sync_ms } : {}),
        },
      ];
  return {
    machine: p?.machine ?? { hostname: 'bench', id: 'bench-calibration', measured_at: new Date().toISOString() },
    adapters: adapters.map((a) => ({
      ...a,
      kernels: a.kernels.map((k) => ({ ...k, ms: k.ms * f })),
      ...(a.launch_ms !== undefined ? { launch_ms: a.launch_ms * f } : {}),
    })),
    links: p?.links ?? [],
  };
}

/**
 * The stored profile, its sharing figures as BENCH_SHARING says: `kernel` drops the whole-step
 * ones (the per-kernel model), `none` drops all (ranks split the adapter's throughput); default
 * all (whole steps where measured). For comparing the sharing models on the same measurements.
 */
function storedProfile(): MachineProfile | null {
  const p = loadMachineProfile();
  const mode = process.env.BENCH_SHARING ?? 'step';
  if (!p || mode === 'step') return p;
  if (mode !== 'kernel' && mode !== 'none') throw new Error(`BENCH_SHARING must be step, kernel or none, got "${mode}"`);
  return {
    ...p,
    adapters: p.adapters.map(({ shared, ...a }) => {
      const kept = mode === 'kernel' ? (shared ?? []).filter((x) => x.op !== STEP_SHARE_OP) : [];
      return kept.length ? { ...a, shared: kept } : a;
    }),
  };
}

/** Which speeds a plan uses, for the output and stderr: the stored profile's file and date, and its sharing speedups. */
function speedsOf(p: MachineProfile | null): { speeds: string; sharing: string } {
  if (!p) return { speeds: 'defaults (no stored machine profile)', sharing: 'not measured: ranks sharing an adapter split its throughput' };
  const shared = p.adapters.flatMap((a) => a.shared ?? []);
  const figures = (xs: typeof shared, what: string) => {
    const s = xs.map((x) => x.speedup);
    return `k=${[...new Set(xs.map((x) => x.k))].join(',')} at ${xs.length} ${what}: x${Math.min(...s).toFixed(2)} to x${Math.max(...s).toFixed(2)}`;
  };
  const steps = shared.filter((x) => x.op === STEP_SHARE_OP);
  const kernels = shared.filter((x) => x.op !== STEP_SHARE_OP);
  return {
    speeds: `stored machine profile ${profilePath()} (${p.machine.measured_at}, sizes ${(p.sizes ?? []).join(',') || '?'})`,
    sharing: shared.length
      ? [
          ...(steps.length ? [`whole steps (used), ${figures(steps, 'micro-batches')}`] : []),
          ...(kernels.length ? [`kernels${steps.length ? '' : ' (used)'}, ${figures(kernels, 'sizes')}`] : []),
        ].join('; ')
      : 'not measured in this profile (taken before it was, or BENCH_SHARING=none): ranks sharing an adapter split its throughput',
  };
}

const isSingle = (l: LayoutPlan) => l.ranks.length === 1 && !l.layout.activation_checkpointing;

/** The speeds scaled so that the single-rank layout's prediction is the median of its measured step times. */
async function calibrated(preset: string, stored: MachineProfile | null, singleMeasured: number[], ranks = devices) {
  const unscaled = (await plan(preset, stored, ranks)).layouts.find(isSingle)!;
  const f = median(singleMeasured) / unscaled.time.step_ms;
  return {
    result: await plan(preset, scaled(stored, f), ranks),
    calibration: {
      ...speedsOf(stored),
      single_measured_ms: singleMeasured,
      single_predicted_ms: unscaled.time.step_ms,
      kernel_time_scale: f,
      note: 'every kernel and launch time of the speeds scaled by the median measured single-rank step over its prediction',
    },
  };
}

interface Row {
  layout: string;
  rank_order: number;
  error: number | null;
  measured_ms?: number;
  failed?: string;
  [k: string]: unknown;
}

/** One preset's summary: the rows, the median absolute error, the first choice against the fastest measured. */
function summary(preset: string, calibration: object, rows: Row[], extra: Record<string, unknown> = {}) {
  const ok = rows.filter((x): x is Row & { error: number; measured_ms: number } => typeof x.error === 'number');
  // measured at the calibration's machine speed: the measurement over the run's speed factor
  const norm = (x: Row & { measured_ms: number }) => x.measured_ms / ((x.speed_factor as number | undefined) ?? 1);
  const fastest = ok.reduce((a, b) => (b.measured_ms < a.measured_ms ? b : a), ok[0]!);
  const fastestNorm = ok.reduce((a, b) => (norm(b) < norm(a) ? b : a), ok[0]!);
  const firstChoice = ok.find((x) => x.rank_order === Math.min(...ok.map((y) => y.rank_order)))!;
  return {
    preset,
    devices,
    steps,
    ...extra,
    calibration,
    layouts: rows,
    median_abs_error: median(ok.map((x) => Math.abs(x.error))),
    first_choice: firstChoice?.layout,
    fastest_measured: fastest?.layout,
    first_choice_within_10pct: firstChoice && fastest ? firstChoice.measured_ms <= 1.1 * fastest.measured_ms : null,
    median_abs_error_drift_corrected: median(ok.map((x) => Math.abs((x.error_drift_corrected as number | undefined) ?? x.error))),
    fastest_measured_drift_corrected: fastestNorm?.layout,
    first_choice_within_10pct_drift_corrected: firstChoice && fastestNorm ? norm(firstChoice) <= 1.1 * norm(fastestNorm) : null,
    memory_all_within_5pct: rows.every((x) => x.memory_max_rel_error === undefined || (x.memory_max_rel_error as number) <= 0.05),
    model_states_exact: rows.every((x) => x.model_states_exact !== false),
  };
}

const r3 = (x: number) => Math.round(x * 1000) / 1000;
/** a row: the plan's prediction scaled by the machine's speed during the run against the gauge's at calibration (1 without a gauge) */
const timeRow = (l: LayoutPlan, measuredMs: number, speedFactor = 1) => ({
  layout: layoutName(l.layout),
  rank_order: l.rank_order,
  predicted_ms: Math.round(l.time.step_ms * 10) / 10,
  measured_ms: Math.round(measuredMs * 10) / 10,
  error: r3((l.time.step_ms - measuredMs) / measuredMs),
  speed_factor: r3(speedFactor),
  error_drift_corrected: r3((l.time.step_ms * speedFactor - measuredMs) / measuredMs),
  predicted: l.time,
});

/** --from FILE: the file's measured rows against this build's predictions. */
async function fromFile(file: string) {
  const old = JSON.parse(readFileSync(file, 'utf8')) as {
    results: { preset: string; devices: number; calibration: Record<string, unknown>; layouts: Row[] }[];
  };
  const stored = storedProfile();
  const s = speedsOf(stored);
  process.stderr.write(`bench:advisor --from ${file}: speeds from the ${s.speeds}; sharing ${s.sharing}\n`);
  const out = [];
  for (const r of old.results) {
    const measured = new Map(r.layouts.filter((x) => typeof x.measured_ms === 'number').map((x) => [x.layout, x.measured_ms!]));
    // every single-rank measurement of the file: its calibration run(s) and the listed row
    const cal = r.calibration.single_measured_ms;
    const singles = [
      ...(Array.isArray(cal) ? (cal as number[]) : typeof cal === 'number' ? [cal] : []),
      ...(measured.has('single') ? [measured.get('single')!] : []),
    ];
    const { result, calibration } = await calibrated(r.preset, stored, singles, r.devices);
    const rows: Row[] = [];
    for (const x of r.layouts) {
      const l = result.layouts.find((y) => layoutName(y.layout) === x.layout);
      const m = measured.get(x.layout);
      if (!l || m === undefined)
        rows.push({ layout: x.layout, rank_order: l?.rank_order ?? -1, error: null, failed: x.failed ?? 'not listed now' });
      else rows.push({ ...timeRow(l, m), previous_predicted_ms: x.predicted_ms });
    }
    out.push(summary(r.preset, calibration, rows, { from: file, devices: r.devices }));
  }
  return out;
}

const fromAt = process.argv.indexOf('--from');
const out: Record<string, unknown>[] = [];
if (fromAt >= 0) {
  const file = process.argv[fromAt + 1];
  if (!file) throw new Error('bench:advisor --from FILE: name an earlier bench:advisor JSON');
  out.push(...(await fromFile(file)));
} else
  for (const preset of presets) {
    // speeds: the stored profile (shardwise profile) or the defaults, calibrated by the preset's
    // single-rank steps measured here against their prediction: a short run first, to order the
    // layouts, then again with the listed single row's measurement
    const stored = storedProfile();
    const s = speedsOf(stored);
    process.stderr.write(`bench:advisor ${preset}: speeds from the ${s.speeds}; sharing ${s.sharing}\n`);
    const p = PRESETS[preset]!;
    const gauge = await SpeedGauge.open({
      B: BATCH,
      T: p.block_size,
      C: p.d_model,
      NH: p.n_head,
      V: BUILTIN_VOCAB['builtin:grammar'],
      L: p.n_layer,
    });
    const base = await gauged(gauge, `${preset}-calibrate`, (await plan(preset, stored)).layouts.find(isSingle)!.launch);
    const first = await calibrated(preset, stored, [base.step_ms]);
    const layouts = first.result.layouts.filter((l) => withCkpt || !l.layout.activation_checkpointing).slice(0, maxLayouts);
    const measured = new Map<string, Measured>();
    const failed = new Map<string, string>();
    for (const l of layouts) {
      const name = `${preset} ${layoutName(l.layout)}`;
      try {
        measured.set(layoutName(l.layout), await gauged(gauge, name, l.launch));
      } catch (e) {
        failed.set(layoutName(l.layout), (e as Error).message);
      }
      // progress on stderr, one line per layout (the JSON object comes at the end)
      process.stderr.write(`${name}: ${measured.get(layoutName(l.layout))?.step_ms.toFixed(1) ?? failed.get(layoutName(l.layout))} ms\n`);
    }
    // The first choice and the three fastest measured run again (BENCH_AGAIN times), and each of
    // them is judged on the median of all its runs' steps: the fastest of some thirty short runs on
    // a noisy machine is partly the luckiest (the winner's curse), and one run of the first choice
    // partly unlucky. On small here the layouts' runs varied by up to 20% minutes apart.
    const provisional = await calibrated(preset, stored, [
      base.step_ms,
      ...(measured.has('single') ? [measured.get('single')!.step_ms] : []),
    ]);
    const order = new Map(provisional.result.layouts.map((l) => [layoutName(l.layout), l.rank_order]));
    const done = [...measured.keys()];
    const choice = done.reduce((a, b) => ((order.get(b) ?? Infinity) < (order.get(a) ?? Infinity) ? b : a), done[0]!);
    const fastest3 = [...done].sort((a, b) => measured.get(a)!.step_ms - measured.get(b)!.step_ms).slice(0, 3);
    // round after round (the machine's drift then falls on each of them alike)
    for (let round = 1; round <= again; round++) {
      for (const name of new Set([choice, ...fastest3])) {
        const l = layouts.find((x) => layoutName(x.layout) === name)!;
        try {
          measured.set(name, merged(measured.get(name)!, await gauged(gauge, `${preset} ${name} (again)`, l.launch)));
        } catch (e) {
          process.stderr.write(`${preset} ${name} (again): ${(e as Error).message}\n`);
        }
        process.stderr.write(`${preset} ${name} (${measured.get(name)!.runs} runs): ${measured.get(name)!.step_ms.toFixed(1)} ms\n`);
      }
    }
    gauge.close();
    const single = measured.get('single');
    const singles = [base, ...(single ? [single] : [])];
    const { result, calibration } = await calibrated(
      preset,
      stored,
      singles.map((x) => x.step_ms),
    );
    const gaugeAtCalibration = median(singles.map((x) => x.gauge_ms!));
    const rows: Row[] = layouts.map((l0) => {
      const name = layoutName(l0.layout);
      const l = result.layouts.find((y) => layoutName(y.layout) === name)!;
      const m = measured.get(name);
      if (!m) return { layout: name, rank_order: l.rank_order, error: null, failed: failed.get(name) };
      let memErr = 0;
      let statesExact = true;
      l.ranks.forEach((k) => {
        const meas = m.peak_bytes[String(k.rank)] ?? {};
        for (const c of MEMORY_CATEGORIES) {
          const x = meas[c] ?? 0;
          if (['params', 'grads', 'optimizer'].includes(c) && x !== k.memory[c]) statesExact = false;
          if (x > 0) memErr = Math.max(memErr, Math.abs(k.memory[c] - x) / x);
        }
      });
      return {
        ...timeRow(l, m.step_ms, m.gauge_ms! / gaugeAtCalibration),
        gauge_ms: Math.round(m.gauge_ms! * 10) / 10,
        runs: m.runs,
        memory_max_rel_error: Math.round(memErr * 10000) / 10000,
        model_states_exact: statesExact,
      };
    });
    out.push(summary(preset, { ...calibration, gauge_ms: gaugeAtCalibration }, rows));
  }
rmSync(root, { recursive: true, force: true });
process.stdout.write(JSON.stringify({ results: out }) + '\n');
