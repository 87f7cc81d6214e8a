// Where a run's rank processes come from. The controller only sees this interface: the local
// implementation forks ranks on this machine (src-main/launch/local-ranks.ts); a LAN agent
// implementation (issue 6, item 2) asks paired agents for remote ones and plugs in here.
import { LocalRanks } from '../launch/local-ranks.js';
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

export interface RankLauncher {
  launch(job: TrainJob, onMessage: (m: RankMessage, rank: number) => void, onLog: (rank: number, stream: 'stdout' | 'stderr', line: string) => void): LaunchedRanks;
}

export class LocalRankLauncher implements RankLauncher {
  constructor(private readonly commTimeoutMs?: number) {}

  launch(job: TrainJob, onMessage: (m: RankMessage, rank: number) => void, onLog: (rank: number, stream: 'stdout' | 'stderr', line: string) => void): LaunchedRanks {
    return new LocalRanks(job, onMessage, this.commTimeoutMs, { onOutput: onLog });
  }
}
