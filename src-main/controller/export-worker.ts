// runs.export's writing half: `shardwise export --format torchrun --json` in a worker process
// (the export reads checkpoints and writes the rank's file formats, which the controller does not
// load), its answer one JSON line. The export folder is written whole or not at all by the worker.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const TOOLS_ENTRY = fileURLToPath(new URL('../../workers/cli/tools.js', import.meta.url));
/** a tiny run exports in about a second; a big one writes its weights and moments twice over */
const EXPORT_TIMEOUT_MS = 10 * 60_000;

const WorkerAnswerSchema = z.object({
  outDir: z.string(),
  step: z.number(),
  steps: z.number(),
  files: z.array(z.string()),
  unmapped: z.array(z.string()),
  world: z.number(),
});
export type ExportWorkerAnswer = z.infer<typeof WorkerAnswerSchema>;

/** The worker refused the request (exit 2: its checks, worded for the command line) or failed. */
export class ExportWorkerError extends Error {
  override name = 'ExportWorkerError';
  constructor(
    message: string,
    readonly badInput: boolean,
  ) {
    super(message);
  }
}

/** `shardwise export SOURCE --format torchrun --out OUT --json ...flags` in a child; resolves with its answer. */
export function runExportWorker(source: string, out: string, flags: string[]): Promise<ExportWorkerAnswer> {
  return new Promise((resolve, reject) => {
    const child = fork(TOOLS_ENTRY, ['export', source, '--format', 'torchrun', '--out', out, '--json', ...flags], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      timeout: EXPORT_TIMEOUT_MS,
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', (e) => reject(new ExportWorkerError(`could not start the export worker: ${e.message}`, false)));
    child.on('exit', (code, signal) => {
      const said =
        stderr
          .trim()
          .replace(/^shardwise: /, '')
          .split('\n')[0] ?? '';
      if (code !== 0) {
        const why = said || (signal ? `killed by ${signal}` : `exit code ${code}`);
        reject(new ExportWorkerError(`the export failed: ${why}`, code === 2));
        return;
      }
      const line = stdout.trim().split('\n').at(-1) ?? '';
      try {
        resolve(WorkerAnswerSchema.parse(JSON.parse(line)));
      } catch {
        reject(new ExportWorkerError(`the export worker answered something else than its result line: ${line.slice(0, 200)}`, false));
      }
    });
  });
}
