// What a remote rank needs from this machine's disk, sent through its agent into the run's
// folder there: the checkpoint to resume from (a flat folder of files) and a dataset file. The
// job the agent receives names them by paths relative to that folder.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { TrainJob } from '../../workers/protocol/train.js';
import type { AgentSession } from '../cluster/agent-client.js';

export async function shipRunFiles(session: AgentSession, runId: string, job: TrainJob): Promise<TrainJob> {
  const out: TrainJob = { ...job, run_dir: '.' };
  if (job.resume_from) {
    const name = path.basename(job.resume_from);
    for (const f of readdirSync(job.resume_from)) {
      const full = path.join(job.resume_from, f);
      if (statSync(full).isFile()) await session.putFile(runId, `checkpoints/${name}/${f}`, readFileSync(full));
    }
    out.resume_from = `checkpoints/${name}`;
  }
  if (!job.data.dataset.startsWith('builtin:')) {
    const rel = `data/${path.basename(job.data.dataset)}`;
    await session.putFile(runId, rel, readFileSync(job.data.dataset));
    out.data = { dataset: rel };
  }
  return out;
}

/** NTP-style: of `samples` pings, the offset (agent clock - ours, ms) of the one with the shortest round trip. */
export async function clockOffset(session: AgentSession, samples = 8): Promise<{ offsetMs: number; rttMs: number }> {
  let best = await session.ping();
  for (let i = 1; i < samples; i++) {
    const s = await session.ping();
    if (s.rttMs < best.rttMs) best = s;
  }
  return best;
}
