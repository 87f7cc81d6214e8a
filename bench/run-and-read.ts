// Run `shardwise train --json` and read what it prints: the benchmarks' one way to train a case
// and take its step lines and summary. The CLI prints one JSON object a line (a step line per
// step, `type: 'step'`; the run summary last); a failed run is a TrainRunError naming the case,
// the exit code and the end of stderr, where the CLI says what was wrong.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** the CLI the benchmarks run (dist/bench/*.js -> bin/shardwise.js) */
export const BIN = fileURLToPath(new URL('../../bin/shardwise.js', import.meta.url));

/** One JSON line of `train --json`, read loosely: the benchmarks pick the fields they report. */
export type TrainLine = { type?: string } & Record<string, any>;

export interface TrainRun {
  /** every JSON line, in order */
  lines: TrainLine[];
  /** the step lines (`type: 'step'`), in order */
  steps: TrainLine[];
  /** the last line: the run's summary */
  summary: TrainLine;
}

export class TrainRunError extends Error {
  override name = 'TrainRunError';
  constructor(
    /** the case, as the benchmark names it */
    readonly label: string,
    readonly code: number | null,
    /** the last lines of stderr (up to 20) */
    readonly stderrTail: string,
  ) {
    super(`${label}: shardwise train exited ${code ?? 'on a signal'}: ${stderrTail.split('\n').at(-1) ?? ''}`);
  }
}

/** The JSON objects of a text of lines; other lines (a warning, a blank) are skipped. */
export const jsonLines = (text: string): TrainLine[] =>
  text
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) => JSON.parse(l) as TrainLine);

export interface TrainOptions {
  /** added to the benchmark's environment */
  env?: Record<string, string>;
  /** each JSON line as it arrives (a benchmark timing the lines or sampling the process) */
  onLine?: (line: TrainLine, pid: number) => void;
}

/** `shardwise train ...args --json`; resolves with its lines once it exits 0, rejects with a TrainRunError otherwise. */
export function trainJson(label: string, args: readonly string[], opts: TrainOptions = {}): Promise<TrainRun> {
  const child = spawn(process.execPath, [BIN, 'train', ...args, '--json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  const lines: TrainLine[] = [];
  let partial = '';
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    const whole = (partial + d).split('\n');
    partial = whole.pop()!;
    for (const line of jsonLines(whole.join('\n'))) {
      lines.push(line);
      opts.onLine?.(line, child.pid!);
    }
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      lines.push(...jsonLines(partial));
      if (code !== 0 || lines.length === 0) return reject(new TrainRunError(label, code, err.trim().split('\n').slice(-20).join('\n')));
      resolve({ lines, steps: lines.filter((l) => l.type === 'step'), summary: lines.at(-1)! });
    });
  });
}
