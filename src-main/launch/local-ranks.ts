// Rank processes of one run on this machine. Rank 0 starts first and hosts the rendezvous
// store on an ephemeral loopback port (it reports the port), then ranks 1..N-1 start with it.
// Every message is schema-checked; a rank that fails, sends garbage or exits early fails the
// run: the others are stopped (SIGTERM, then SIGKILL) so no process is left behind.
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { COMM_ENV } from '../../workers/protocol/comm.js';
import { type RankMessage, RankMessageSchema, type TrainJob } from '../../workers/protocol/train.js';

const RANK_ENTRY = fileURLToPath(new URL('../../workers/train/rank-main.js', import.meta.url));

export interface RankFailure {
  rank: number;
  message: string;
}

export class LocalRanks {
  private readonly children: (ChildProcess | null)[];
  private readonly exited: boolean[];
  private failure: RankFailure | null = null;
  private finished = 0;
  private settle!: (f: RankFailure | null) => void;
  /** resolves with null when every rank exited 0, or with the first failure */
  readonly result: Promise<RankFailure | null>;

  constructor(
    private readonly job: TrainJob,
    private readonly onMessage: (m: RankMessage & { rank?: number }, rank: number) => void,
    private readonly commTimeoutMs?: number,
  ) {
    const n = job.parallel?.world ?? 1;
    this.children = new Array(n).fill(null);
    this.exited = new Array(n).fill(false);
    this.result = new Promise((resolve) => (this.settle = resolve));
    const secret = randomBytes(24).toString('hex');
    this.start(0, secret, 0);
  }

  get world() {
    return this.children.length;
  }

  private start(rank: number, secret: string, port: number) {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      [COMM_ENV.rank]: String(rank),
      [COMM_ENV.worldSize]: String(this.world),
      [COMM_ENV.localRank]: String(rank),
      [COMM_ENV.masterAddr]: '127.0.0.1',
      [COMM_ENV.masterPort]: String(port),
      [COMM_ENV.secret]: secret,
    };
    if (this.commTimeoutMs !== undefined) env[COMM_ENV.timeoutMs] = String(this.commTimeoutMs);
    const child = fork(RANK_ENTRY, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json', env });
    this.children[rank] = child;
    child.on('message', (raw) => {
      const r = RankMessageSchema.safeParse(raw);
      if (!r.success) {
        this.fail(rank, `rank ${rank} sent a malformed message (${r.error.issues[0]?.message})`);
        return;
      }
      const m = r.data;
      if (m.type === 'store' && rank === 0) {
        for (let k = 1; k < this.world; k++) this.start(k, secret, m.port);
        return;
      }
      if (m.type === 'error') {
        this.fail(rank, this.world > 1 ? `rank ${rank}: ${m.message}` : m.message);
        return;
      }
      this.onMessage(m, rank);
    });
    child.on('error', (e) => this.fail(rank, `could not start rank ${rank}: ${e.message}`));
    child.on('exit', (code, signal) => {
      this.exited[rank] = true;
      if (code === 0) {
        this.finished++;
        if (this.finished === this.world) this.settle(this.failure);
      } else {
        const stage = this.job.parallel?.strategy === 'pp' ? ` (pipeline stage ${rank})` : '';
        this.fail(rank, `rank ${rank}${stage} ${signal ? `was killed by ${signal}` : `exited with code ${code}`} before finishing`);
      }
      if (this.failure && this.exited.every((e, i) => e || this.children[i] === null)) this.settle(this.failure);
    });
    child.send({ type: 'job', job: this.job });
  }

  private fail(rank: number, message: string) {
    if (!this.failure) this.failure = { rank, message };
    this.stop();
    if (this.exited.every((e, i) => e || this.children[i] === null)) this.settle(this.failure);
  }

  /** Stop every rank: SIGTERM now, SIGKILL to whatever is still alive 3 s later. */
  stop() {
    for (const [i, c] of this.children.entries()) if (c && !this.exited[i]) c.kill('SIGTERM');
    const t = setTimeout(() => {
      for (const [i, c] of this.children.entries()) if (c && !this.exited[i]) c.kill('SIGKILL');
    }, 3000);
    t.unref();
  }
}
