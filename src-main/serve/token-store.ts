// The serve token kept beside the runs (<runs>/.serve-token, mode 0600), so that a restarted
// `shardwise serve` accepts the token an open tab already holds and the tab reconnects by
// itself; a fresh token per start stranded every tab. `--rotate-token` replaces it (tabs that
// hold the old one are refused and say so). The run store lists only folders with a state, so
// the dotfile is never mistaken for a run.
import { chmodSync, existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { newToken } from './token.js';

export const TOKEN_FILE = '.serve-token';
const TOKEN_RE = /^[A-Za-z0-9_-]{16,256}$/;

export function tokenPath(runsRoot: string): string {
  return path.join(runsRoot, TOKEN_FILE);
}

/** Writes a new token (atomically, 0600) and returns it. */
export function rotateToken(runsRoot: string): string {
  const token = newToken();
  writeFileAtomic(tokenPath(runsRoot), `${token}\n`, 0o600);
  return token;
}

/**
 * The stored token, or a new one stored first. A file others could read is narrowed to 0600
 * (the token controls this machine's runs); one that is not a token is an error naming the file,
 * never silently replaced (that would lock out every tab without saying why).
 */
export function loadOrCreateToken(runsRoot: string): { token: string; created: boolean } {
  const file = tokenPath(runsRoot);
  if (!existsSync(file)) return { token: rotateToken(runsRoot), created: true };
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const token = readFileSync(file, 'utf8').trim();
  if (!TOKEN_RE.test(token)) {
    throw new Error(
      `${file} does not hold a serve token (16-256 characters of A-Z a-z 0-9 _ -); replace it with: shardwise serve --rotate-token`,
    );
  }
  return { token, created: false };
}
