// npm run bench:serve — what the controller's telemetry costs a run: the same DDP run (tiny,
// world 2) through `shardwise train --json` and through `shardwise serve` with a subscriber
// receiving every step, memory and span event over the WebSocket, alternated so drift on a
// shared machine hits both. Median step time over steps 3..N of each run. Prints one JSON object.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { median, relDiffPct } from '../common/stats.js';
import { BIN, trainJson } from './run-and-read.js';

const steps = Number(process.env.BENCH_STEPS ?? 20);
const pairs = Number(process.env.BENCH_PAIRS ?? 3);
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-serve-'));
const config = { preset: 'tiny', strategy: 'ddp', world: 2, steps, eval_interval: 0, checkpoint_interval: 0 };

async function cliRun(i: number): Promise<number[]> {
  const args = [
    '--preset',
    'tiny',
    '--strategy',
    'ddp',
    '--world',
    '2',
    '--steps',
    String(steps),
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--out',
    path.join(root, `cli-${i}`),
  ];
  return (await trainJson(`cli-${i}`, args)).steps.map((m) => m.step_ms as number);
}

const serve = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--runs', path.join(root, 'serve')], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let printed = '';
const url = await new Promise<string>((resolve, reject) => {
  serve.stdout.setEncoding('utf8').on('data', (d: string) => {
    printed += d;
    const m = /open (http\S+)/.exec(printed);
    if (m) resolve(m[1]!);
  });
  serve.on('exit', (c) => reject(new Error(`serve exited ${c}`)));
});
const port = /:(\d+)\//.exec(url)![1];
const ws = new WebSocket(`ws://127.0.0.1:${port}/api`);
await new Promise((r) => ws.once('open', r));
let nextId = 0;
const pending = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
let onEvent: (e: { type: string; row?: { step_ms: number }; state?: { status: string } }) => void = () => undefined;
let events = 0;
ws.on('message', (d) => {
  const m = JSON.parse(String(d)) as { id?: number; event?: string; data?: any; result?: unknown; error?: unknown };
  if (m.event) {
    events++;
    onEvent(m.data!);
  } else pending.get(m.id!)?.(m);
});
const call = (method: string, params: unknown) =>
  new Promise<any>((resolve, reject) => {
    const id = nextId++;
    pending.set(id, (m) => (m.error ? reject(new Error(JSON.stringify(m.error))) : resolve(m.result)));
    ws.send(JSON.stringify({ id, method, params }));
  });
await call('auth', { token: /token=(.*)$/.exec(url)![1] });

async function serveRun(i: number): Promise<number[]> {
  const stepMs: number[] = [];
  const done = new Promise<void>((resolve) => {
    onEvent = (e) => {
      if (e.type === 'step') stepMs.push(e.row!.step_ms);
      if (e.type === 'state' && ['completed', 'failed', 'stopped'].includes(e.state!.status)) resolve();
    };
  });
  const { runId } = await call('runs.launch', { config: { ...config, name: `serve-${i}` } });
  await call('runs.subscribe', { runId });
  await done;
  await call('runs.unsubscribe', { runId });
  return stepMs;
}

const cli: number[] = [];
const viaServe: number[] = [];
for (let i = 0; i < pairs; i++) {
  cli.push(median((await cliRun(i)).slice(2)));
  viaServe.push(median((await serveRun(i)).slice(2)));
}
ws.close();
serve.kill('SIGTERM');
await new Promise((r) => serve.once('exit', r));
rmSync(root, { recursive: true, force: true });
const a = median(cli);
const b = median(viaServe);
process.stdout.write(
  `${JSON.stringify({ strategy: 'ddp', world: 2, preset: 'tiny', steps, pairs, cli_step_ms: cli, serve_step_ms: viaServe, median_cli_ms: a, median_serve_ms: b, overhead_pct: relDiffPct(b, a), events_received: events })}\n`,
);
