// The exported job's launch.sh (workers/export/torchrun/template/launch.sh) as it supervises its
// rank processes, whichever rank fails first. The ranks here are real processes of a stand-in
// interpreter (SHARDWISE_PYTHON: a shell script that answers launch.sh's probes and plays a rank),
// so the test needs no PyTorch: rank 1 fails at once while rank 0 waits, as a rank left in a
// collective would; rank 0 answers SIGUSR1 with its "stack" as train.py's faulthandler does.
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { tempDir } from '../cli/helpers.js';

const TEMPLATE = fileURLToPath(new URL('../../workers/export/torchrun/template/launch.sh', import.meta.url));

/** A job folder whose launch.sh starts `world` ranks of the stand-in interpreter. */
function job(world: number): { dir: string; python: string } {
  const dir = tempDir('torch-launch');
  writeFileSync(path.join(dir, 'launch.sh'), readFileSync(TEMPLATE, 'utf8').replace('__WORLD__', String(world)));
  writeFileSync(path.join(dir, 'train.py'), '');
  const python = path.join(dir, 'fake-python');
  writeFileSync(
    python,
    [
      '#!/usr/bin/env bash',
      // launch.sh's probes: `-c 'import torch'`, the torch version, a free port
      'if [[ "$1" == -c ]]; then',
      '  case "$2" in *version*) echo 1.13.0 ;; *socket*) echo 29999 ;; esac',
      '  exit 0',
      'fi',
      'if [[ "$RANK" == 1 ]]; then echo "rank 1: failing" >&2; exit 3; fi',
      'trap \'echo "rank $RANK stack: waiting in barrier" >&2\' USR1',
      'echo "rank $RANK started $$" >&2',
      'for i in $(seq 600); do sleep 0.1; done',
    ].join('\n'),
  );
  chmodSync(python, 0o755);
  return { dir, python };
}

it('a rank that fails while another waits ends the job at once: exit 1, the waiting rank says where it was and is stopped', () => {
  const { dir, python } = job(2);
  const t0 = Date.now();
  const r = spawnSync('bash', [path.join(dir, 'launch.sh')], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, SHARDWISE_PYTHON: python, LAUNCHER: 'processes' },
  });
  const ms = Date.now() - t0;
  expect(r.status, r.stderr).toBe(1);
  // rank 0 alone would wait 60 s: the launcher stopped it after rank 1's failure
  expect(ms, r.stderr).toBeLessThan(20_000);
  expect(r.stderr).toContain('rank 1: failing');
  expect(r.stderr).toContain('launch.sh: a rank failed; stopping the others');
  expect(r.stderr).toContain('rank 0 stack: waiting in barrier');
  const pid = Number(/rank 0 started (\d+)/.exec(r.stderr)?.[1]);
  expect(pid).toBeGreaterThan(0);
  let alive = true;
  try {
    process.kill(pid, 0);
  } catch {
    alive = false;
  }
  expect(alive, `rank 0 (pid ${pid}) is still running`).toBe(false);
});
