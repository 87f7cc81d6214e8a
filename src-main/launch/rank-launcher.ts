// Where a run's rank processes come from. The run driver (run-driver.ts) only sees this
// interface: the local implementation forks ranks on this machine (local-ranks.ts); the same
// class asks paired agents for remote ones when the launch carries a placement (ranks on agents
// connected beforehand, placement.ts). Tests may put a fake behind it.
import type { RankMessage, TrainJob } from '../../workers/protocol/train.js';
import { LocalRanks, type LocalRanksOptions, type RankFailure } from './local-ranks.js';

/** the first failure; `lost`: the ranks gone on their own (died, or their machine lost), for an elastic run */
export type RankFailureInfo = RankFailure;

/** A launched set of ranks: one run's processes, wherever they are. */
export interface LaunchedRanks {
  /** null once every rank exited cleanly, else the first failure (after all ranks are gone) */
  readonly result: Promise<RankFailureInfo | null>;
  /** reap every rank: SIGTERM (a rank then checkpoints its step and exits), then SIGKILL to what is still alive after graceMs (0: SIGKILL now) */
  stop(graceMs?: number): void;
  /** local process ids still alive (empty for remote ranks) */
  readonly pids: number[];
}

/** where each rank runs (default: every rank here), when all started, and where their output goes (default: ours) */
export type LaunchOptions = LocalRanksOptions;

export interface RankLauncher {
  launch(job: TrainJob, onMessage: (m: RankMessage, rank: number) => void, opts?: LaunchOptions): LaunchedRanks;
}

export class LocalRankLauncher implements RankLauncher {
  /** commTimeoutMs: how long a collective waits for a peer (default: SHARDWISE_COMM_TIMEOUT_MS, else the ranks' own) */
  constructor(private readonly commTimeoutMs = commTimeoutFromEnv()) {}

  launch(job: TrainJob, onMessage: (m: RankMessage, rank: number) => void, opts: LaunchOptions = {}): LaunchedRanks {
    return new LocalRanks(job, onMessage, this.commTimeoutMs, opts);
  }
}

function commTimeoutFromEnv(): number | undefined {
  const v = process.env.SHARDWISE_COMM_TIMEOUT_MS;
  return v ? Number(v) : undefined;
}
