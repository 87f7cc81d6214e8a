// `node dist/workers/cli/probe-devices.js`: load the WebGPU driver, list the adapters, print
// one JSON object (DeviceProbeResult) on stdout and exit. Runs as a throwaway child of the
// controller, which must never load a GPU driver itself.
import { listAdapters } from '../gpu/device.js';
import type { DeviceProbeResult } from '../protocol/devices.js';

async function main(): Promise<number> {
  const { found, tried } = await listAdapters();
  // Assigning device.ts's reports to the protocol type makes the compiler keep them in step.
  const result: DeviceProbeResult = { adapters: found.map((f) => f.report), tried };
  process.stdout.write(JSON.stringify(result) + '\n');
  return 0;
}

main().then(
  (code) => {
    // Dawn keeps native handles alive; leave as soon as stdout has drained.
    process.stdout.write('', () => process.exit(code));
  },
  (e: unknown) => {
    process.stderr.write(`probe-devices: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
