// The rank watchdog program (rank-watchdog.ts starts it): ends a run's rank processes when the
// process that forked them (the controller, or an agent) dies, whatever state the ranks are in.
// A rank's own `disconnect` handler cannot run while it is stopped (SIGSTOP), blocked or busy in
// a kernel, and only a SIGKILL from another process ends a stopped one: this is that process.
//
// Its standard input is a pipe from the forking process, one JSON line per message:
//   {"pid":1234,"start":"5678"}  watch a rank: its pid and its start time (/proc/PID/stat field 22)
//   {"end":true}                 the run ended with its ranks gone: exit, killing nothing
// End of input without "end" means the forking process died (the kernel closes the pipe however a
// process ends): after GRACE_MS (ranks that can still run exit on their own disconnect), every
// watched rank still alive is SIGKILLed, and the shared-memory ring names it held open on /dev/shm
// (workers/comm/shm/: a name lives only during a ring's handshake) are removed. Then it exits; it
// also exits once every rank it watches is gone.
//
// A pid is killed only while it still has the start time recorded at fork: a pid the kernel
// reused for another process since has another start time (boot-relative clock ticks, fixed for
// a process's life), so it is never touched. The input is data from our parent only; nothing in
// it is run, and only the pids it names are ever signalled.
import fs from 'node:fs';
import { startTimeOf } from './rank-watchdog.js';

/** how long ranks that can still run get to exit on their own once their parent is gone */
const GRACE_MS = 2000;
/** how often it looks whether every rank it watches is gone */
const POLL_MS = 2000;
const SHM_NAME = /^\/dev\/shm\/shardwise-\d+-[0-9a-f]{32}$/;

/** The shared-memory ring files a process holds open under their names (unlinked ones read "… (deleted)"). */
function shmNamesOf(pid: number): string[] {
  const names: string[] = [];
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (SHM_NAME.test(target)) names.push(target);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // gone, or not ours to read
  }
  return names;
}

function main() {
  const watched = new Map<number, string>();
  let ended = false;
  let buffered = '';
  const onLine = (line: string) => {
    let m: unknown;
    try {
      m = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof m !== 'object' || m === null) return;
    const { pid, start, end } = m as { pid?: unknown; start?: unknown; end?: unknown };
    if (end === true) ended = true;
    else if (
      Number.isInteger(pid) &&
      (pid as number) > 1 &&
      pid !== process.pid &&
      pid !== process.ppid &&
      typeof start === 'string' &&
      /^\d+$/.test(start)
    )
      watched.set(pid as number, start);
  };
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (d: string) => {
    const lines = (buffered + d).split('\n');
    buffered = lines.pop()!.slice(-1024);
    for (const l of lines) onLine(l);
  });
  let orphaned = false;
  process.stdin.on('end', () => {
    if (ended) process.exit(0);
    orphaned = true;
    const alive = () => [...watched].filter(([pid, start]) => startTimeOf(pid) === start).map(([pid]) => pid);
    const names = alive().flatMap(shmNamesOf);
    setTimeout(() => {
      for (const pid of alive()) {
        names.push(...shmNamesOf(pid));
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // exited between the check and the kill
        }
      }
      for (const name of new Set(names))
        try {
          fs.unlinkSync(name);
        } catch {
          // already unlinked by its peer's handshake
        }
      process.exit(0);
    }, GRACE_MS);
  });
  process.stdin.on('error', () => process.stdin.emit('end'));
  // every rank it watched is gone (the parent alive but its "end" lost): its job is done
  setInterval(() => {
    if (!orphaned && watched.size > 0 && [...watched].every(([pid, start]) => startTimeOf(pid) !== start)) process.exit(0);
  }, POLL_MS);
  // a Ctrl-C or hang-up aimed at the controller's terminal is the controller's to handle
  for (const s of ['SIGINT', 'SIGHUP'] as const) process.on(s, () => {});
}

main();
