// The first start of `shardwise serve` on a machine with no stored profile profiles it in the
// background (profile --quick) and says so; until the profile is stored the advisor says its
// speeds are the defaults and that the profile is on its way, then its predictions come from the
// measured profile. A second start with the profile stored does not profile again.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connect, type Serve, startServe, stopServe, waitFor } from './helpers/serve.js';

describe('serve on a machine without a stored profile', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-first-profile-'));
  const env = { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1', SHARDWISE_NO_AUTO_PROFILE: '' };
  let serve: Serve | undefined;
  afterAll(async () => {
    if (serve) await stopServe(serve);
    rmSync(dir, { recursive: true, force: true });
  });

  it('profiles the machine in the background, says so, and the advisor switches from the defaults to it', async () => {
    serve = await startServe(path.join(dir, 'runs'), env);
    expect(serve.output()).toContain(
      "shardwise serve: no profile of this machine is stored: profiling it in the background (shardwise profile --quick, a few seconds) for the advisor's predictions",
    );
    const c = await connect(serve);
    const ask = () => c.call('runs.advise', { preset: 'tiny', batch_size: 8, seq_len: 64, devices: 2 });
    const early = await ask();
    if (!/profiled this machine in/.test(serve.output())) {
      expect(early.profile.source).toBe('defaults');
      expect(early.notes).toContain(
        'this machine is being profiled in the background (a few seconds): until it is stored predictions use the defaults; ask again once it is done',
      );
    }
    await waitFor(
      () => /profiled this machine in \d+\.\d s; predictions now use its speeds/.test(serve!.output()),
      120_000,
      'the background profile',
    );
    expect(existsSync(path.join(dir, 'home', 'machine-profile.json'))).toBe(true);
    const after = await ask();
    expect(after.profile.source).toBe('measured');
    expect(after.notes.some((n) => n.includes('no machine profile is stored'))).toBe(false);
    c.close();
    await stopServe(serve);

    serve = await startServe(path.join(dir, 'runs'), env);
    expect(serve.output()).not.toContain('profiling it in the background');
  }, 180_000);
});
