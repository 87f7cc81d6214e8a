// A real `shardwise serve` process on loopback (dist/ must be built) and a typed client for it.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { WebSocket } from 'ws';
import type { RunEvent } from '../../../common/api/index.js';
import { type WebSocketCtor, WsApiClient } from '../../../src-renderer/src/api/ws-client.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const BIN = path.join(ROOT, 'bin/shardwise.js');

export interface Serve {
  proc: ChildProcess;
  port: number;
  token: string;
  url: string;
  wsUrl: string;
  output: () => string;
}

/**
 * env: added to this process's (e.g. SHARDWISE_HOME for its paired agents' keys); port: a fixed
 * one (a restart on the same address), else any free one; args: more flags (--rotate-token)
 */
export function startServe(runsDir: string, env: NodeJS.ProcessEnv = {}, opts: { port?: number; args?: string[] } = {}): Promise<Serve> {
  const proc = spawn(process.execPath, [BIN, 'serve', '--port', String(opts.port ?? 0), '--runs', runsDir, ...(opts.args ?? [])], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    // no first-start profile in the background unless a test asks (it loads the shared cores)
    env: { ...process.env, SHARDWISE_DEBUG: '', SHARDWISE_SERVE_AUTH_TIMEOUT_MS: '1500', SHARDWISE_NO_AUTO_PROFILE: '1', ...env },
  });
  let out = '';
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve, reject) => {
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /open (http:\/\/127\.0\.0\.1:(\d+)\/#token=([A-Za-z0-9_-]+))/.exec(out);
      if (m) resolve({ proc, url: m[1]!, port: Number(m[2]), token: m[3]!, wsUrl: `ws://127.0.0.1:${m[2]}/api`, output: () => out });
    });
    proc.on('exit', (code) => reject(new Error(`serve exited with ${code} before listening: ${out}`)));
  });
}

export async function stopServe(s: Serve, signal: NodeJS.Signals = 'SIGTERM') {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
  const exited = new Promise((r) => s.proc.once('exit', r));
  s.proc.kill(signal);
  await exited;
}

export function connect(s: Serve): Promise<WsApiClient> {
  return WsApiClient.connect(s.wsUrl, s.token, WebSocket as unknown as WebSocketCtor);
}

/** Every event of a run until `until` returns true (or the timeout). */
export async function collectEvents(
  c: WsApiClient,
  runId: string,
  until: (e: RunEvent, all: RunEvent[]) => boolean,
  timeoutMs = 150_000,
): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  let unsubscribe: (() => Promise<void>) | undefined;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(`run ${runId}: condition not met in ${timeoutMs} ms; last events ${JSON.stringify(events.slice(-3)).slice(0, 600)}`),
        ),
      timeoutMs,
    );
    void c
      .subscribe(runId, (e) => {
        events.push(e);
        if (until(e, events)) {
          clearTimeout(timer);
          resolve();
        }
      })
      .then((u) => (unsubscribe = u), reject);
  });
  await unsubscribe?.();
  return events;
}

export const ended = (e: RunEvent) => e.type === 'state' && ['completed', 'failed', 'stopped'].includes(e.state.status);

export { alive } from './processes.js';

export async function waitFor(cond: () => boolean, timeoutMs: number, what: string) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
