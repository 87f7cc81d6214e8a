// Where a run's rank processes come from. The controller only sees this interface: the local
// implementation forks ranks on this machine (src-main/launch/local-ranks.ts); the
// same class asks paired agents for remote ones when the launch carries a placement (ranks on
// agents connected beforehand, src-main/launch/placement.ts).
import { LocalRanks, type RankInfo, type RankPlacement } from '../launch/local-ranks.js';
import type { RankMessage, TrainJob } from '../../workers/protocol/train.js';

export interface RankFailureInfo {
  rank: number;
  message: string;
}

/** A launched set of ranks: one run's processes, wherever they are. */
export interface LaunchedRanks {
  /** null once every rank exited cleanly, else the first failure (after all ranks are gone) */
  readonly result: Promise<RankFailureInfo | null>;
  /** reap every rank: SIGTERM, then SIGKILL to what is still alive after a grace period */
  stop(): void;
  /** local process ids still alive (empty for remote ranks) */
  readonly pids: number[];
}

export interface LaunchOptions {
  /** where each rank runs (default: every rank here) */
  placement?: RankPlacement[];
  /** every rank, here and remote, has started: where, and its process id there */
  onRanksStarted?: (ranks: RankInfo[]) => void;
}

export interface RankLauncher {
  launch(
    job: TrainJob,
    onMessage: (m: RankMessage, rank: number) => void,
    onLog: (rank: number, stream: 'stdout' | 'stderr', line: string) => void,
    opts?: LaunchOptions,
  ): LaunchedRanks;
}

export class LocalRankLauncher implements RankLauncher {
  constructor(private readonly commTimeoutMs?: number) {}

  launch(
    job: TrainJob,
    onMessage: (m: RankMessage, rank: number) => void,
    onLog: (rank: number, stream: 'stdout' | 'stderr', line: string) => void,
    opts: LaunchOptions = {},
  ): LaunchedRanks {
    return new LocalRanks(job, onMessage, this.commTimeoutMs, { ...opts, onOutput: onLog });
  }
}
