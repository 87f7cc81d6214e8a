// `shardwise train`: resolve the job (defaults <- preset <- --config file <- flags), create the
// run folder, fork the rank process, and turn its messages into a progress bar (TTY), JSON
// lines (--json) and the run folder's state, metrics and summary.
import path from 'node:path';
import type { RankMessage, TrainJob } from '../../workers/protocol/train.js';
import { LocalRanks } from '../launch/local-ranks.js';
import { connectPlacement as connectAgents, PlacementError } from '../launch/placement.js';
import { JobError, resolveJob as resolveRequest } from '../launch/resolve-job.js';
import { findResumePoint, ResumeError, type ResumePoint, rewindRun } from '../launch/resume.js';
import { RunFolder } from '../runs/run-folder.js';
import { StepAggregator } from './step-aggregator.js';
import { bubbleMeterFor } from './bubble.js';
import { runSummary } from './run-summary.js';
import { CliError } from './errors.js';
import { Progress } from './progress.js';
import { FLAG_NAMES, parseTrainArgs } from './train-flags.js';

/** argv -> the job to run (a new run, or a resumed one with the folder it continues). */
export function resolveJob(argv: string[]): { job: TrainJob; json: boolean; resume?: ResumePoint; strategy: string; placement?: string } {
  const a = parseTrainArgs(argv);
  if (a.resume) {
    let resume: ResumePoint;
    try {
      resume = findResumePoint(a.resume, a.request.steps);
    } catch (e) {
      if (e instanceof ResumeError) throw new CliError(e.message, 2, { cause: e });
      throw e;
    }
    return { job: resume.job, json: a.json, resume, strategy: resume.job.parallel?.strategy ?? 'single', placement: a.placement };
  }
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  try {
    const job = resolveRequest(a.request, {
      runDir: (preset) => path.resolve(a.out ?? path.join('runs', `${stamp}-${preset}-${process.pid}`)),
      file: a.file,
      configName: a.configName,
      names: FLAG_NAMES,
    });
    return { job, json: a.json, strategy: job.parallel?.strategy ?? 'single', placement: a.placement };
  } catch (e) {
    if (e instanceof JobError) throw new CliError(e.message, 2, { cause: e });
    throw e;
  }
}

async function connectPlacement(spec: string, world: number) {
  try {
    return await connectAgents(spec, world);
  } catch (e) {
    throw e instanceof PlacementError ? new CliError(e.message) : e;
  }
}

export async function trainCommand(argv: string[]): Promise<number> {
  const { job, json, resume, strategy, placement: placementArg } = resolveJob(argv);
  const world0 = job.parallel?.world ?? 1;
  // connect to the agents before anything is written: a wrong address or an unpaired agent is a usage error
  const placement = placementArg ? await connectPlacement(placementArg, world0) : undefined;
  let run: RunFolder;
  let startedSteps = false;
  if (resume) {
    run = resume.folder;
    rewindRun(resume, { status: 'running' }); // as runs.resume does: metrics and spans past the checkpoint are replayed
    startedSteps = true; // never delete a resumed run
  } else {
    try {
      run = RunFolder.create(job.run_dir, job, job.train.steps);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
  }
  const world = job.parallel?.world ?? 1;
  const progress = new Progress(job.train.steps, json);
  let lastVal: number | undefined;
  const done = new Map<number, Extract<RankMessage, { type: 'done' }>>();
  const tokensPerS: number[] = [];
  const steps = new StepAggregator(world);
  const bubble = bubbleMeterFor(job.parallel);

  const commTimeout = process.env.SHARDWISE_COMM_TIMEOUT_MS ? Number(process.env.SHARDWISE_COMM_TIMEOUT_MS) : undefined;
  const ranks = new LocalRanks(
    job,
    (m, rank) => {
      switch (m.type) {
        case 'ready':
          if (rank === 0) {
            run.updateState({ status: 'running' });
            progress.info(
              `training on ${m.adapter.description}${m.adapter.isSoftware ? ' (software adapter)' : ''}: ${m.params.toLocaleString('en-US')} parameters, vocab ${m.vocab_size}, ` +
                `${strategy}${world > 1 ? ` x ${world} ranks` : ''}, run folder ${run.dir}`,
            );
          }
          break;
        case 'step': {
          const s = steps.add(rank, m);
          if (!s) break;
          startedSteps = true;
          tokensPerS.push(s.tokens_per_s);
          run.appendMetric(s);
          progress.step(s.step, s.loss, s.tokens_per_s, lastVal);
          if (json) process.stdout.write(`${JSON.stringify(s)}\n`);
          if (s.step % 10 === 0 || s.step === job.train.steps) run.updateState({ step: s.step });
          break;
        }
        case 'eval': {
          lastVal = m.val_loss;
          const line = { type: 'eval', step: m.step, val_loss: m.val_loss };
          run.appendMetric(line);
          if (json) process.stdout.write(`${JSON.stringify(line)}\n`);
          else progress.info(`step ${m.step}: validation loss ${m.val_loss.toFixed(4)}`);
          break;
        }
        case 'checkpoint':
          run.appendMetric({ type: 'checkpoint', step: m.step, path: m.path });
          run.updateState({ step: m.step });
          break;
        case 'spans':
          run.appendSpans(m.spans.map((s) => ({ rank, step: m.step, ...s })));
          bubble?.add(m.step, rank, m.spans);
          break;
        case 'done':
          done.set(rank, m);
          break;
      }
    },
    commTimeout,
    {
      placement: placement?.ranks,
      onRanksStarted: (started) => {
        if (placement) run.updateState({ ranks: started.map(({ rank, machine, pid }) => ({ rank, machine, pid })) }); // as API-launched runs record it
        if (json && placement) process.stdout.write(`${JSON.stringify({ type: 'ranks', ranks: started })}\n`);
      },
    },
  );

  const interrupted = (why = 'interrupted by the user') => {
    ranks.stop();
    run.updateState({ status: 'interrupted', error: why });
    progress.finish();
    process.stderr.write(`shardwise: ${why}; continue with: shardwise train --resume ${run.dir}\n`);
    process.exit(130);
  };
  const onSignal = () => interrupted();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // `shardwise train --json | head`: the reader went away; stop like an interrupt, resumable
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') interrupted('standard output was closed');
  });
  const failure = await ranks.result;
  placement?.close();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  progress.finish();

  if (failure || done.size !== world) {
    const reason = failure?.message ?? `only ${done.size} of ${world} ranks finished`;
    if (!startedSteps) run.remove();
    else run.updateState({ status: 'failed', error: reason });
    throw new CliError(reason, 1);
  }
  const d0 = done.get(0)!;
  const summary = runSummary({ job, runDir: run.dir, done, tokensPerS, lastLoss: steps.lastLoss, lastVal, bubble });
  const mean = summary.tokens_per_s as number;
  run.writeSummary(summary);
  run.updateState({ status: 'completed', step: d0.steps });
  if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    process.stdout.write(
      `done: ${d0.steps} steps, final loss ${steps.lastLoss.toFixed(4)}${lastVal !== undefined ? `, validation loss ${lastVal.toFixed(4)}` : ''}, ${Math.round(mean)} tokens/s. Run folder: ${run.dir}\n`,
    );
  }
  return 0;
}
