// `shardwise devices [--json]`: this machine's WebGPU adapters and GPUs (src-main/machine/devices.ts
// collects them), printed as a listing or one JSON object.
import type { AdapterReport } from '../../workers/protocol/devices.js';
import { collectDevices, type DevicesReport } from '../machine/devices.js';

const USAGE = 'usage: shardwise devices [--json]';

function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1 && n % 1024 === 0) {
    n /= 1024;
    i++;
  }
  return `${n} ${units[i]}`;
}

function driverSource(a: AdapterReport): string {
  if (a.source === 'system') return "the system's GPU driver";
  if (a.source.startsWith('swiftshader:')) return `SwiftShader Vulkan ICD ${a.source.slice('swiftshader:'.length)}`;
  return a.source;
}

const mib = (v: number | null): string => (v === null ? '?' : v >= 1024 ? `${(v / 1024).toFixed(1)} GiB` : `${v} MiB`);

/** The human listing. */
export function formatDevices(r: DevicesReport): string {
  const out: string[] = [];
  out.push(`WebGPU adapters (probed in a child process in ${(r.probe.ms / 1000).toFixed(1)} s)`);
  if (!r.probe.ok) out.push(`  probe failed: ${r.probe.error}`);
  else if (r.adapters.length === 0) out.push('  none found');
  for (const a of r.adapters) {
    const kind = a.isSoftware
      ? /swiftshader/i.test(`${a.description} ${a.architecture} ${a.source}`)
        ? 'software (SwiftShader, runs on the CPU)'
        : 'software'
      : 'hardware';
    out.push(`  [${a.index}] ${a.description || a.device}  ${kind}`);
    out.push(`      vendor ${a.vendor || '?'} · architecture ${a.architecture || '?'} · device ${a.device || '?'} · backend ${a.backend}`);
    out.push(`      driver: ${driverSource(a)}`);
    const sys = a.systemGpu === null ? undefined : r.system.controllers[a.systemGpu];
    if (sys) out.push(`      system GPU: [${sys.index}] ${sys.vendor} ${sys.model}`);
    const l = a.limits;
    out.push(
      `      limits: buffer ${bytes(l.maxBufferSize)} · storage binding ${bytes(l.maxStorageBufferBindingSize)} · ` +
        `${l.maxComputeInvocationsPerWorkgroup ?? '?'} invocations/workgroup · ${bytes(l.maxComputeWorkgroupStorageSize)} workgroup memory`,
    );
    out.push(`      features: ${a.features.length ? a.features.join(', ') : 'none'}`);
  }
  if (r.tried.length) out.push(`  tried: ${r.tried.join('; ')}`);
  out.push('');
  out.push('System GPUs (systeminformation)');
  if (r.system.error) out.push(`  ${r.system.error}`);
  else if (r.system.controllers.length === 0) out.push('  none reported (a virtual machine or container without a GPU?)');
  for (const c of r.system.controllers) {
    const parts = [`VRAM ${mib(c.vramMiB)}`, `driver ${c.driver ?? '?'}`, `bus ${c.bus ?? '?'}${c.busAddress ? ` ${c.busAddress}` : ''}`];
    const live: string[] = [];
    if (c.utilizationPct !== null) live.push(`${c.utilizationPct}% busy`);
    if (c.memoryUsedMiB !== null) live.push(`${mib(c.memoryUsedMiB)} of ${mib(c.memoryTotalMiB ?? c.vramMiB)} used`);
    if (c.temperatureC !== null) live.push(`${c.temperatureC} °C`);
    if (c.powerDrawW !== null) live.push(`${c.powerDrawW} W`);
    out.push(`  [${c.index}] ${c.vendor} ${c.model}`);
    out.push(`      ${parts.join(' · ')}${live.length ? `\n      now: ${live.join(' · ')}` : ''}`);
  }
  return out.join('\n') + '\n';
}

/** Entry for the CLI dispatcher; returns the exit code. */
export async function devicesCommand(argv: string[]): Promise<number> {
  let json = false;
  for (const arg of argv) {
    if (arg === '--json') json = true;
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(`${USAGE}\n  lists this machine's WebGPU adapters and GPUs; --json prints one JSON object\n`);
      return 0;
    } else {
      process.stderr.write(`shardwise devices: unknown ${arg.startsWith('-') ? 'flag' : 'argument'} '${arg}'; ${USAGE}\n`);
      return 2;
    }
  }
  const report = await collectDevices();
  process.stdout.write(json ? JSON.stringify(report) + '\n' : formatDevices(report));
  if (!report.probe.ok) {
    process.stderr.write(`shardwise devices: ${report.probe.error}\n`);
    return 1;
  }
  if (report.adapters.length === 0) {
    process.stderr.write(
      `shardwise devices: no WebGPU adapter found; tried: ${report.tried.join('; ')}. ` +
        "Install a GPU driver with Vulkan support, or Debian's chromium package (apt-get install chromium) for the SwiftShader software adapter.\n",
    );
    return 1;
  }
  return 0;
}
