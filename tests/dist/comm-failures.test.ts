// Failure handling between real rank processes: a rank killed with SIGKILL mid all-reduce, a
// rank that never posts the collective, a rank that never starts, a malformed frame from an
// authenticated peer. Every other rank must fail within the deadline, naming the operation,
// group, sequence number and the peer, and exit by itself.
import { describe, expect, it } from 'vitest';
import { launchWorld } from './fixtures/comm-launch.js';

describe('comm failures never hang', () => {
  it('kill -9 of rank 2 during 4 MiB all-reduces: ranks 0, 1, 3 fail within the 5 s deadline, every one names rank 2, and exits cleanly', async () => {
    const w = await launchWorld(4, 'kill', { bytes: 4 << 20, timeoutMs: 5000 });
    await Promise.all([0, 1, 2, 3].map((r) => w.line(r, 'running')));
    const killedAt = Date.now();
    w.procs[2].kill('SIGKILL');
    const res = await w.done;
    expect(res[2].signal).toBe('SIGKILL');
    for (const r of [0, 1, 3]) {
      const err = res[r].lines.find((l) => l.type === 'error');
      expect(err, `rank ${r} printed ${JSON.stringify(res[r].lines)}\n${res[r].stderr}`).toBeTruthy();
      // a survivor that learns of the death from another survivor's abort is told "lost rank 2"
      // on that link before it closes, so every survivor names the killed rank
      expect(err!.peer, `rank ${r}: ${JSON.stringify(err)}`).toBe(2);
      expect(err!.op).toBe('allReduce');
      expect(err!.group).toBe('world');
      expect(typeof err!.seq).toBe('number');
      expect(String(err!.message)).toMatch(/^allReduce on group world seq \d+ failed, peer rank 2: /);
      expect(res[r].code).toBe(0); // exited by itself: no leaked sockets or timers
      const killMs = killedAt - w.startedAt;
      expect((err!.at as number) - killMs).toBeLessThan(5000); // failed within the deadline
      expect(res[r].exitMs - killMs).toBeLessThan(10_000); // and shut down (2 loaded cores: slack)
    }
  });

  it('SIGSTOP of rank 2 during all-reduces (its sockets stay open): ranks 0 and 1 fail on the 250 ms x 4 heartbeat, long before the 60 s deadline, naming rank 2, and exit', async () => {
    const w = await launchWorld(
      3,
      'kill',
      { bytes: 1 << 20, timeoutMs: 60_000 },
      { env: { SHARDWISE_COMM_HEARTBEAT_MS: '250', SHARDWISE_COMM_HEARTBEAT_MISSED: '4' } },
    );
    await Promise.all([0, 1, 2].map((r) => w.line(r, 'running')));
    const stoppedAt = Date.now();
    w.procs[2].kill('SIGSTOP');
    try {
      const errs = await Promise.all([0, 1].map((r) => w.line(r, 'error')));
      for (const [r, err] of errs.entries()) {
        expect(err.peer, `rank ${r}: ${JSON.stringify(err)}`).toBe(2);
        expect(err.op).toBe('allReduce');
        expect(['peer-lost', 'protocol']).toContain(err.code);
        // ~1 s of silence; generous for 2 loaded cores, far below the op deadline
        expect((err.at as number) - (stoppedAt - w.startedAt)).toBeLessThan(15_000);
      }
      expect(errs.map((e) => String(e.message)).join('\n')).toMatch(/stopped answering|lost rank 2/);
    } finally {
      w.procs[2].kill('SIGKILL');
    }
    const res = await w.done;
    for (const r of [0, 1]) expect(res[r].code, res[r].stderr).toBe(0);
  });

  it('a rank that never posts the all-reduce: the others fail after the 1.5 s deadline naming a peer (timing out themselves, or told by a rank that did), and the aborted group fails later ops at once', async () => {
    const w = await launchWorld(4, 'straggler', { opTimeoutMs: 1500 });
    const res = await w.done;
    const codes: string[] = [];
    for (const r of [0, 1, 2]) {
      const err = res[r].lines.find((l) => l.type === 'error');
      expect(err, JSON.stringify(res[r].lines)).toBeTruthy();
      // whichever rank's deadline fires first aborts its links; a rank whose own timer had not
      // fired yet on 2 loaded cores then learns of it as a lost peer, never as a hang
      expect(['timeout', 'peer-lost']).toContain(err!.code);
      codes.push(err!.code as string);
      expect(err!.op).toBe('allReduce');
      expect(err!.seq).toBe(0);
      expect(typeof err!.peer).toBe('number');
      expect(err!.ms as number).toBeGreaterThanOrEqual(1400);
      expect(err!.ms as number).toBeLessThan(6000); // 1.5 s deadline + scheduling on 2 loaded cores
      const later = res[r].lines.find((l) => l.type === 'later')!;
      expect(later).toMatchObject({ failedFast: true });
      expect(['timeout', 'peer-lost']).toContain(later.code);
      expect(res[r].code).toBe(0);
    }
    expect(codes).toContain('timeout');
    // the rank the straggler's partner waits for is the straggler itself
    const e2 = res[2].lines.find((l) => l.type === 'error')!;
    if (e2.code === 'timeout') expect(e2.peer).toBe(3);
  });

  it('a rank that leaves on purpose right after sending: its data is still received; only an op that needs more from it fails, naming it', async () => {
    const w = await launchWorld(3, 'departure');
    const res = await w.done;
    const r2 = res[2].lines.find((l) => l.type === 'ok' || l.type === 'fail');
    expect(r2, JSON.stringify(res[2].lines) + res[2].stderr).toMatchObject({ type: 'ok', checked: 1, failures: [] });
    const never = res[2].lines.find((l) => l.type === 'never')!;
    expect(never, res[2].stderr).toMatchObject({ code: 'peer-lost', peer: 1 });
    expect(never.ms as number, 'fails after the 1.5 s grace, long before the 60 s deadline').toBeLessThan(10_000);
    for (const r of res) expect(r.code).toBe(0);
  });

  it("ranks that leave while the receiving rank's event loop is blocked for 4 s: it still gets the data, and a departure never reads as a death", async () => {
    // the leaving ranks keep their sockets open until the receiver answers their close (up to
    // the heartbeat window), so its late writes (ring declines, heartbeats) cannot hit a reset
    // that would destroy the socket with the "process group destroyed" close still unread
    const w = await launchWorld(3, 'departure', { stallMs: 4000 });
    const res = await w.done;
    const r2 = res[2].lines.find((l) => l.type === 'ok' || l.type === 'fail' || l.type === 'error');
    expect(r2, JSON.stringify(res[2].lines) + res[2].stderr).toMatchObject({ type: 'ok', checked: 1, failures: [] });
    expect(
      res[2].lines.find((l) => l.type === 'never'),
      res[2].stderr,
    ).toMatchObject({ code: 'peer-lost', peer: 1 });
    expect(res[2].stderr).toMatch(/closed the connection \(code 1000, process group destroyed\)/);
    expect(res[2].stderr).not.toMatch(/EPIPE|ECONNRESET/);
    for (const r of res) expect(r.code).toBe(0);
  });

  it('a rank that leaves before the receiver has created their group: its early frames are still delivered, and the group learns it left', async () => {
    const w = await launchWorld(3, 'departure', { lateGroup: true });
    const res = await w.done;
    const r2 = res[2].lines.find((l) => l.type === 'ok' || l.type === 'fail' || l.type === 'error');
    expect(r2, JSON.stringify(res[2].lines) + res[2].stderr).toMatchObject({ type: 'ok', checked: 1, failures: [] });
    const never = res[2].lines.find((l) => l.type === 'never')!;
    expect(never).toMatchObject({ code: 'peer-lost', peer: 1 });
    expect(never.ms as number, 'fails after the 1.5 s grace, not at the 60 s deadline').toBeLessThan(10_000);
    for (const r of res) expect(r.code).toBe(0);
  });

  it('a rank that never starts: init fails within the 2 s rendezvous deadline naming the missing rank and the setting', async () => {
    const w = await launchWorld(3, 'correctness', {}, { ranks: [0, 1], env: { SHARDWISE_RENDEZVOUS_TIMEOUT_MS: '2000' } });
    const res = await w.done;
    for (const r of res) {
      const err = r.lines.find((l) => l.type === 'error');
      expect(err, JSON.stringify(r.lines)).toBeTruthy();
      expect(String(err!.message)).toMatch(
        /the 3-rank world did not gather within 2000 ms \(SHARDWISE_RENDEZVOUS_TIMEOUT_MS\): rank 2 did not arrive/,
      );
      expect(r.exitMs).toBeLessThan(10_000);
    }
  });

  it('a malformed frame from rank 1 closes only that link: rank 0 logs why, fails the pending op naming rank 1, and keeps serving group {0, 2}', async () => {
    const w = await launchWorld(3, 'badframe');
    const res = await w.done;
    const r0 = res[0].lines.find((l) => l.type === 'ok' || l.type === 'fail');
    expect(r0, JSON.stringify(res[0].lines) + res[0].stderr).toMatchObject({ type: 'ok', failures: [] });
    expect((r0!.error as Record<string, unknown>).peer).toBe(1);
    expect((r0!.error as Record<string, unknown>).code).toBe('protocol');
    expect(res[0].stderr).toMatch(/closing the connection to peer rank 1: bad frame from peer rank 1: bad magic/);
    expect(res[2].lines.find((l) => l.type === 'ok')).toBeTruthy();
    for (const r of res) expect(r.code).toBe(0);
  });
});
