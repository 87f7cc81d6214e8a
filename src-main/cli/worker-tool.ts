// Commands whose work happens on a device (eval, sample) or in the rank's file formats
// (export) run in a worker process: the controller never loads the GPU driver itself.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const TOOLS_ENTRY = fileURLToPath(new URL('../../workers/cli/tools.js', import.meta.url));

export function runWorkerTool(command: string, argv: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [TOOLS_ENTRY, command, ...argv], { stdio: 'inherit' });
    child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : 1)));
    child.on('error', (e) => {
      process.stderr.write(`shardwise: could not start the ${command} worker: ${e.message}\n`);
      resolve(1);
    });
  });
}
