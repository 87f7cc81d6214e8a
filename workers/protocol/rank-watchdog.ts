// The watchdog of one run's rank processes, for whoever forks them (the controller's
// src-main/launch/local-ranks.ts, the agent's workers/agent/runs.ts): a small process of its own
// (rank-watchdog-main.ts) that SIGKILLs the ranks if their parent dies, even stopped or blocked
// ones, which their own `disconnect` handler cannot end. It learns each rank's pid with its start
// time, read here while the rank is our unreaped child (its pid cannot have been reused yet), and
// kills a pid only while it still has that start time. It exits when told the run ended, or once
// it has reaped the ranks after its parent died: it never outlives the run's ranks.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./rank-watchdog-main.js', import.meta.url));

/** A process's start time (field 22 of /proc/PID/stat, clock ticks since boot), or null when it is gone or a zombie. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces and parentheses: fields restart after the last ')'
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

export class RankWatchdog {
  private constructor(private readonly child: ChildProcess) {}

  /** Starts one run's watchdog; null where there is no /proc (then ranks rely on their disconnect handler alone). */
  static start(): RankWatchdog | null {
    if (process.platform !== 'linux' || !existsSync(MAIN)) return null;
    // detached: its own session, so a Ctrl-C or hang-up aimed at our terminal does not reach it;
    // ELECTRON_RUN_AS_NODE: inside the desktop app process.execPath is Electron, run as plain Node
    const env = { ...process.env, ELECTRON_RUN_AS_NODE: '1' };
    const child = spawn(process.execPath, [MAIN], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env });
    child.on('error', () => {});
    child.stdin!.on('error', () => {});
    // it must not keep this process alive: it watches us, not the other way round
    child.unref();
    (child.stdin as Socket).unref();
    return new RankWatchdog(child);
  }

  /** Watch a rank just forked by this process (call it before the event loop turns: the child is unreaped). */
  watch(pid: number | undefined) {
    const start = pid === undefined ? null : startTimeOf(pid);
    if (start !== null) this.send({ pid, start });
  }

  /** The run's ranks are gone: the watchdog exits without killing anything. */
  end() {
    this.send({ end: true });
    this.child.stdin?.end();
  }

  private send(m: object) {
    if (this.child.stdin?.writable) this.child.stdin.write(`${JSON.stringify(m)}\n`);
  }
}
