// `shardwise train`: resolve the job (defaults <- preset <- --config file <- flags), create the
// run folder (or rewind it, with --resume) and drive the ranks with the run driver the controller
// uses too (src-main/launch/run-driver.ts: it writes the run folder); this adds a progress bar
// (TTY) or JSON lines (--json), and turns a signal or a closed stdout into a resumable stop: the
// ranks finish their step and checkpoint it, then it prints how to resume (exit 130). A second
// signal, or ranks that take longer than the stop's grace, end it at once without that checkpoint.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { emulatedLabel } from '../../common/emulated-label.js';
import type { TrainJob } from '../../workers/protocol/train.js';
import { connectPlacement as connectAgents, parsePlacement, PlacementError, reconnectEntries } from '../launch/placement.js';
import { checkLaunchable, JobError, resolveRun } from '../launch/resolve-job.js';
import { LocalRankLauncher } from '../launch/rank-launcher.js';
import { relayoutJob } from '../launch/relayout.js';
import { prepareResume, ResumeError, type ResumePoint, rewindRun } from '../launch/resume.js';
import { pairedSince } from '../launch/elastic/newcomers.js';
import { RunSupervisor } from '../launch/elastic/supervisor.js';
import { HostSampler, hostSources } from '../runs/host-sampler.js';
import { RunFileError } from '../runs/folder-errors.js';
import { RunFolder } from '../runs/run-folder.js';
import { RunLock, RunLockedError } from '../runs/run-lock.js';
import { CliError } from './errors.js';
import { Progress } from '../terminal/progress.js';
import { resumeLayoutOf } from './resume-flags.js';
import { FLAG_NAMES, parseTrainArgs, placedHere } from './train-flags.js';

/** argv -> the job to run (a new run, or a resumed one with the folder it continues and holding its lock). */
export function resolveJob(argv: string[]): {
  job: TrainJob;
  json: boolean;
  resume?: ResumePoint;
  strategy: string;
  placement?: string;
  /** what the run tells its user about the request (config keys ignored, with why) */
  notes?: string[];
} {
  const a = parseTrainArgs(argv);
  if (a.resume && a.initFrom) throw new CliError('--init-from starts a new run; --resume continues one: give one of them', 2);
  if (a.resume) {
    const layout = resumeLayoutOf(a);
    let resume: ResumePoint;
    try {
      resume = prepareResume(a.resume, a.request.steps);
    } catch (e) {
      if (e instanceof ResumeError || e instanceof RunFileError) throw new CliError(e.message, 2, { cause: e });
      throw e;
    }
    // in another layout: the run's job with the flags' fields (relayout.ts), refused before anything is written
    let notes: string[] = [];
    if (Object.keys(layout).length) {
      try {
        const machine = placedHere(a.placement) ? {} : { machineMemory: null };
        ({ job: resume.job, notes } = relayoutJob(resume.job, layout, { names: FLAG_NAMES, ...machine }));
      } catch (e) {
        resume.lock.release();
        if (e instanceof JobError) throw new CliError(`cannot resume in this layout: ${e.message}`, 2, { cause: e });
        throw e;
      }
    }
    const strategy = resume.job.parallel?.strategy ?? 'single';
    return { job: resume.job, json: a.json, resume, strategy, placement: a.placement, notes };
  }
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  try {
    const { job, notes } = resolveRun(a.request, {
      runDir: (preset) => path.resolve(a.out ?? path.join('runs', `${stamp}-${preset}-${process.pid}`)),
      file: a.file,
      configName: a.configName,
      names: FLAG_NAMES,
      // ranks on agents: their machines' memory, not this one's (unknown here)
      ...(placedHere(a.placement) ? {} : { machineMemory: null }),
    });
    checkLaunchable(job, FLAG_NAMES);
    if (a.initFrom) job.init_from = initFromDir(a.initFrom);
    return { job, json: a.json, strategy: job.parallel?.strategy ?? 'single', placement: a.placement, notes };
  } catch (e) {
    if (e instanceof JobError) throw new CliError(e.message, 2, { cause: e });
    throw e;
  }
}

/** --init-from: a Hugging Face GPT-2 folder (the rank reads and checks its tensors against the model). */
function initFromDir(dir: string): string {
  const abs = path.resolve(dir);
  for (const f of ['model.safetensors', 'vocab.json'])
    if (!existsSync(path.join(abs, f)))
      throw new CliError(
        `--init-from ${dir}: no ${f} there (a Hugging Face GPT-2 folder with a character vocab.json, such as an exported PyTorch job's run/hf/step-N)`,
        2,
      );
  return abs;
}

async function connectPlacement(spec: string, world: number) {
  try {
    return await connectAgents(spec, world);
  } catch (e) {
    throw e instanceof PlacementError ? new CliError(e.message) : e;
  }
}

export async function trainCommand(argv: string[]): Promise<number> {
  const { job, json, resume, strategy, placement: placementArg, notes = [] } = resolveJob(argv);
  for (const n of notes) process.stderr.write(`shardwise: note: ${n}\n`);
  // one writer per run folder (run.lock), held until this process ends; a resume took it while checking
  let lock: RunLock | undefined = resume?.lock;
  const release = () => lock?.release();
  process.once('exit', release);
  try {
    return await train(job, json, strategy, placementArg, resume, (l) => (lock = l), notes);
  } finally {
    release();
    process.off('exit', release);
  }
}

async function train(
  job: TrainJob,
  json: boolean,
  strategy: string,
  placementArg: string | undefined,
  resume: ResumePoint | undefined,
  locked: (lock: RunLock) => void,
  notes: string[],
): Promise<number> {
  const world = job.parallel?.world ?? 1;
  // connect to the agents before anything is written: a wrong address or an unpaired agent is a usage error
  const placement = placementArg ? await connectPlacement(placementArg, world) : undefined;
  let run: RunFolder;
  if (resume) {
    run = resume.folder;
    rewindRun(resume, { status: 'running' }); // as runs.resume does: metrics and spans past the checkpoint are replayed
  } else {
    try {
      run = RunFolder.create(job.run_dir, job, job.train.steps);
      locked(RunLock.acquire(run.dir));
    } catch (e) {
      throw new CliError((e as Error).message, e instanceof RunLockedError ? 1 : 2);
    }
  }
  const progress = new Progress(job.train.steps, json);
  const print = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
  let lastVal: number | undefined;
  let lastStep = resume?.fromStep ?? 0;
  // a resume needs a checkpoint: the one resumed from, or one this launch wrote
  let resumable = resume !== undefined;
  const continueWith = (what: string) =>
    resumable ? `continue ${what}with: shardwise train --resume ${run.dir}` : 'no checkpoint was written, so it cannot be resumed';
  const driver = new RunSupervisor(
    run,
    job,
    {
      ready: (m, rank) => {
        if (rank !== 0) return;
        const emulated = emulatedLabel(job);
        progress.info(
          `training on ${emulated ? `an ${emulated}, real kernels on ` : ''}${m.adapter.description}${m.adapter.isSoftware ? ' (software adapter)' : ''}: ${m.params.toLocaleString('en-US')} parameters, vocab ${m.vocab_size}, ` +
            `${strategy}${world > 1 ? ` x ${world} ranks` : ''}, run folder ${run.dir}`,
        );
      },
      checkpoint: () => (resumable = true),
      step: (s) => {
        lastStep = s.step;
        progress.step(s.step, s.loss, s.tokens_per_s, lastVal);
        if (json) print(s);
      },
      eval: (line) => {
        lastVal = line.val_loss;
        if (json) print(line);
        else progress.info(`step ${line.step}: validation loss ${line.val_loss.toFixed(4)}`);
      },
      segment: (s) => {
        if (json) print({ type: 'segment', step: s.from_step, segment: s });
        if (s.reason === 'rank-lost' || s.reason === 'machine-lost')
          progress.info(
            `${s.detail ?? 'ranks were lost'}; continuing as ${s.strategy} x ${s.world} ranks from step ${s.from_step} (${s.source === 'memory' ? 'its in-memory replica' : s.source === 'disk' ? 'its checkpoint' : 'the start'}, ${s.lost_steps} step${s.lost_steps === 1 ? '' : 's'} lost)`,
          );
        for (const n of s.notes ?? []) progress.info(`note: ${n}`);
      },
      ranksStarted: (started) => {
        if (json && placement) print({ type: 'ranks', ranks: started });
      },
    },
    resume?.fromStep,
  );
  driver.notes.push(...notes);
  // an elastic run grows (up to MAX) when a lost machine answers again or a machine is paired while it runs
  if (job.elastic) {
    const since = Date.now();
    driver.rejoin = {
      entries: placementArg ? parsePlacement(placementArg, world) : Array.from({ length: world }, () => ({ where: 'local' })),
      connect: reconnectEntries,
      newMachines: () => pairedSince(since),
    };
  }
  const ended = driver.run(new LocalRankLauncher(), placement);
  // the CPU and RAM of the run's machines, beside its device memory in the dashboard
  const host = new HostSampler(run.dir, hostSources(placement?.ranks)).start();
  void ended.then(
    () => host.stop(),
    () => host.stop(),
  );

  let interruption: string | null = null;
  const interrupted = (why = 'interrupted by the user') => {
    progress.finish();
    if (interruption === null) {
      // the first signal: the ranks finish the step they are in and checkpoint it
      interruption = why;
      driver.stop('interrupted', why);
      process.stderr.write(
        `shardwise: ${why}: stopping after the step in progress (the last one done: ${lastStep}) and writing its checkpoint (Ctrl-C again to quit without one)\n`,
      );
      return;
    }
    // the second: now, without a checkpoint of this step
    driver.interrupt(interruption);
    process.stderr.write(
      `shardwise: ${interruption}; quit without a checkpoint of this step; ${continueWith('from the latest checkpoint ')}\n`,
    );
    process.exit(130);
  };
  const onSignal = () => interrupted();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // `shardwise train --json | head`: the reader went away; stop like an interrupt, resumable
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE' && interruption === null) interrupted('standard output was closed');
  });
  const end = await ended;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  progress.finish();

  if (end.status === 'interrupted' && interruption !== null) {
    const at = driver.stoppedAfter;
    process.stderr.write(
      at !== null
        ? `shardwise: ${interruption}; stopped after step ${at}, its checkpoint written; ${continueWith('')}\n`
        : `shardwise: ${interruption}; the ranks ended without a checkpoint of their step (one failed or was stuck past the 60 s grace, or they had not started training); ${continueWith('from the latest checkpoint ')}\n`,
    );
    return 130;
  }
  if (end.status !== 'completed') {
    // a new run that failed before its first step leaves nothing behind; a resumed one is never deleted
    if (!resume && !driver.recordedSteps) run.remove();
    throw new CliError(end.error, 1);
  }
  const summary = end.summary;
  if (json) print(summary);
  else {
    const val = summary.val_loss as number | undefined;
    process.stdout.write(
      `done: ${String(summary.steps)} steps, final loss ${(summary.final_loss as number).toFixed(4)}${val !== undefined ? `, validation loss ${val.toFixed(4)}` : ''}, ${Math.round(summary.tokens_per_s as number)} tokens/s${emulatedLabel(job) ? ` on an ${emulatedLabel(job)}` : ''}. Run folder: ${run.dir}\n`,
    );
  }
  return 0;
}
