// The first-start demo of `npm start`: where the runs folder is empty, one small run that shows
// what the dashboard is for (tiny GPT, DDP on 2 ranks: live memory per rank, gradient buckets
// overlapping backward, bytes moved). It goes through the controller's public API, the same
// runs.launch a dashboard sends, and is watched like any subscriber: the terminal gets a
// progress line and, when the run completes, the path of its HTML report (the file
// `shardwise report --format html` writes). Stopped or failed, it says how to resume instead.
import path from 'node:path';
import type { LaunchConfig, RunEvent, RunStateView } from '../../common/api/index.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { Progress } from '../terminal/progress.js';
import { exportReport, REPORT_FORMATS } from '../reports/export.js';
import type { ControllerService } from './service.js';

/** about a minute and a half of steps on a software adapter: long enough to watch */
export const DEMO_STEPS = 120;

export function demoConfig(steps = DEMO_STEPS): LaunchConfig {
  // a checkpoint every 10 steps: a demo stopped by Ctrl-C resumes close to where it was
  return { preset: 'tiny', strategy: 'ddp', world: 2, steps, checkpoint_interval: 10 };
}

/** SHARDWISE_DEMO_STEPS (a positive integer) shortens or lengthens the demo. */
export function demoSteps(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SHARDWISE_DEMO_STEPS;
  if (raw === undefined || raw === '') return DEMO_STEPS;
  if (!/^[1-9]\d*$/.test(raw)) throw new Error(`SHARDWISE_DEMO_STEPS must be a positive integer, got "${raw}"`);
  return Number(raw);
}

export interface DemoRun {
  runId: string;
  dir: string;
  /** settles once the run ended and what it ends with was printed (report path, or how to resume) */
  ended: Promise<RunStateView['status']>;
}

const FINAL = new Set<string>(['completed', 'failed', 'stopped', 'interrupted']);

/**
 * Launches the demo when the controller's runs folder holds no run yet; null otherwise (a
 * user who has runs sees them, not a new one). `say` prints one informational line.
 */
export async function startDemoIfFirst(
  service: ControllerService,
  say: (line: string) => void,
  steps = demoSteps(),
): Promise<DemoRun | null> {
  const { runs } = await service.call<'runs.list'>('runs.list', {});
  if (runs.length > 0) return null;
  const config = demoConfig(steps);
  const { runId, dir } = await service.call<'runs.launch'>('runs.launch', { config });
  say(`shardwise: first start, so a demo run: ${config.preset} GPT, ${config.strategy} on ${config.world} ranks, ${steps} steps (${dir})`);
  return { runId, dir, ended: watch(service, runId, dir, steps, say) };
}

function watch(
  service: ControllerService,
  runId: string,
  dir: string,
  steps: number,
  say: (line: string) => void,
): Promise<RunStateView['status']> {
  const progress = new Progress(steps, false);
  const sub = service.subscribe(runId);
  return new Promise((resolve) => {
    const end = (state: RunStateView) => {
      sub.close();
      progress.finish();
      void reportOrHint(state, dir, say).then(() => resolve(state.status));
    };
    const on = (e: RunEvent) => {
      if (e.type === 'step') progress.step(e.row.step, e.row.loss, e.row.tokens_per_s);
      const state = e.type === 'state' ? e.state : e.type === 'snapshot' ? e.snapshot.state : null;
      if (state && FINAL.has(state.status)) end(state);
    };
    sub.onReady = () => {
      for (let e = sub.take(); e; e = sub.take()) on(e);
    };
    sub.onReady();
  });
}

async function reportOrHint(state: RunStateView, dir: string, say: (line: string) => void) {
  if (state.status !== 'completed') {
    const what =
      state.status === 'failed'
        ? `failed at step ${state.step}: ${state.error ?? 'no reason given'}`
        : `${state.status} at step ${state.step} of ${state.steps}`;
    say(`shardwise: the demo run ${what}; resume it with Resume on its page in the dashboard, or: shardwise train --resume ${dir}`);
    return;
  }
  const file = path.join(dir, REPORT_FORMATS.html.file);
  try {
    writeFileAtomic(file, await exportReport(dir, 'html'));
    say(`shardwise: the demo run completed; its report: ${file}`);
  } catch (e) {
    say(
      `shardwise: the demo run completed, but its report could not be written (${(e as Error).message}); try: shardwise report ${dir} --format html`,
    );
  }
}
