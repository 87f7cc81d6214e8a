// The serve token kept beside the runs: a restart reads the same token (so open tabs reconnect),
// the file is 0600 whatever the umask, a rotation replaces it, and a file that is not a token is
// an error naming it rather than a silent new token.
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateToken, rotateToken, tokenPath } from '../../../src-main/serve/token-store.js';

describe('the serve token store', () => {
  const dirs: string[] = [];
  const runs = () => {
    const d = mkdtempSync(path.join(tmpdir(), 'shardwise-token-'));
    dirs.push(d);
    return path.join(d, 'runs');
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('creates the token once (mode 0600) and a second start reads the same one', () => {
    const root = runs();
    const first = loadOrCreateToken(root);
    expect(first.created).toBe(true);
    expect(first.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(statSync(tokenPath(root)).mode & 0o777).toBe(0o600);
    const again = loadOrCreateToken(root);
    expect(again).toEqual({ token: first.token, created: false });
  });

  it('rotating writes a different token that the next start reads', () => {
    const root = runs();
    const { token } = loadOrCreateToken(root);
    const rotated = rotateToken(root);
    expect(rotated).not.toBe(token);
    expect(readFileSync(tokenPath(root), 'utf8')).toBe(`${rotated}\n`);
    expect(statSync(tokenPath(root)).mode & 0o777).toBe(0o600);
    expect(loadOrCreateToken(root).token).toBe(rotated);
  });

  it('narrows a token file others can read to 0600, and refuses one that holds no token', () => {
    const root = runs();
    const { token } = loadOrCreateToken(root);
    chmodSync(tokenPath(root), 0o644);
    expect(loadOrCreateToken(root).token).toBe(token);
    expect(statSync(tokenPath(root)).mode & 0o777).toBe(0o600);
    writeFileSync(tokenPath(root), 'short\n');
    expect(() => loadOrCreateToken(root)).toThrow(`${tokenPath(root)} does not hold a serve token`);
    expect(() => loadOrCreateToken(root)).toThrow('shardwise serve --rotate-token');
  });
});
