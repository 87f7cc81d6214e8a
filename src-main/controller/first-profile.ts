// A controller's first start on a machine with no stored profile: `shardwise profile --quick`
// (a few seconds) runs in the background, so that the first run's predictions come from this
// machine's speeds and not the defaults (SwiftShader-like: a first run showed -98% errors). The
// advisor reads the stored profile at each request, so predictions switch to it once it is
// stored; until then `note()` says that they use the defaults and why. SHARDWISE_NO_AUTO_PROFILE=1
// turns it off (tests that check the defaults, a machine busy with something else).
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadMachineProfile } from '../machine/profile-store.js';

const BIN = fileURLToPath(new URL('../../../bin/shardwise.js', import.meta.url));

type State = 'off' | 'running' | 'done' | 'failed';

export class FirstProfile {
  state: State = 'off';
  private startedAt = 0;
  private error = '';
  private child: ChildProcess | null = null;

  constructor(private readonly log: (line: string) => void = () => undefined) {}

  /** Starts the profile where none is stored; returns whether it started. */
  start(): boolean {
    if (process.env.SHARDWISE_NO_AUTO_PROFILE === '1') return false;
    try {
      if (loadMachineProfile()) return false;
    } catch {
      return false; // a damaged profile file: the advisor reports it with what to do
    }
    this.state = 'running';
    this.startedAt = Date.now();
    this.log(
      "no profile of this machine is stored: profiling it in the background (shardwise profile --quick, a few seconds) for the advisor's predictions",
    );
    let err = '';
    const child = fork(BIN, ['profile', '--quick', '--json'], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    this.child = child;
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', (e) => this.finish(null, e.message));
    child.on('exit', (code, signal) => this.finish(code, err.trim().split('\n').at(-1) || `exit ${code ?? signal}`));
    return true;
  }

  private finish(code: number | null, why: string) {
    if (this.state !== 'running') return;
    this.child = null;
    const s = ((Date.now() - this.startedAt) / 1000).toFixed(1);
    if (code === 0) {
      this.state = 'done';
      this.log(`profiled this machine in ${s} s; predictions now use its speeds ('shardwise profile' shows them)`);
    } else {
      this.state = 'failed';
      this.error = why;
      this.log(
        `the background profile of this machine failed (${why}); predictions use the default speeds until 'shardwise profile' succeeds`,
      );
    }
  }

  /** What the advisor adds to its notes while predictions cannot use this machine's speeds yet. */
  note(): string | null {
    if (this.state === 'running')
      return 'this machine is being profiled in the background (a few seconds): until it is stored predictions use the defaults; ask again once it is done';
    if (this.state === 'failed') return `the background profile of this machine failed (${this.error}): run 'shardwise profile'`;
    return null;
  }

  stop() {
    this.child?.kill('SIGTERM');
  }
}
