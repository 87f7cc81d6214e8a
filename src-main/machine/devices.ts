// What this machine has: its WebGPU adapters (probed in a child process) joined with
// systeminformation's view of its GPUs (vendor, model, VRAM, driver, bus, and live
// utilisation / memory / temperature where the driver reports them). `shardwise devices`
// prints it; the controller's device cache, `shardwise plan` and `shardwise profile` read it.
//
// The controller never loads a GPU driver itself: a driver that crashes or hangs must take
// down only the probe, so the probe runs as `node dist/workers/cli/probe-devices.js` with a
// timeout and its answer is schema-checked on receipt.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import si from 'systeminformation';
import { type AdapterReport, DeviceProbeResultSchema } from '../../workers/protocol/devices.js';
import { type NvidiaSmiGpu, queryNvidiaSmi } from './nvidia-smi.js';

const DEFAULT_PROBE_TIMEOUT_MS = 20_000;
const SYSTEM_TIMEOUT_MS = 10_000;

/** One GPU as the operating system sees it (systeminformation's graphics().controllers). */
export interface SystemGpu {
  index: number;
  vendor: string;
  model: string;
  /** MiB; null where not reported */
  vramMiB: number | null;
  driver: string | null;
  bus: string | null;
  busAddress: string | null;
  /** live values, null where the driver does not report them (nvidia-smi does) */
  utilizationPct: number | null;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number | null;
  temperatureC: number | null;
  powerDrawW: number | null;
}

export interface DeviceEntry extends AdapterReport {
  /** index into system.controllers of the GPU this adapter drives; null for software adapters or no match */
  systemGpu: number | null;
}

/** The `--json` object. */
export interface DevicesReport {
  adapters: DeviceEntry[];
  /** driver sources the probe tried, in order */
  tried: string[];
  probe: { ok: boolean; ms: number; error?: string };
  system: { source: 'systeminformation'; controllers: SystemGpu[]; error?: string };
}

/** How the probe child ended; read by readProbe. */
export interface ProbeOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  timeoutMs: number;
  stdout: string;
  stderr: string;
  spawnError?: string;
}

export type ProbeReading = { ok: true; adapters: AdapterReport[]; tried: string[] } | { ok: false; error: string; tried: string[] };

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return lines[lines.length - 1] ?? '';
}

/** Turn the probe child's exit into adapters or one clear error. Pure, for tests. */
export function readProbe(o: ProbeOutcome): ProbeReading {
  const stderrHint = lastLine(o.stderr) ? `; its last message: ${lastLine(o.stderr)}` : '';
  if (o.spawnError) return { ok: false, tried: [], error: `could not start the WebGPU probe: ${o.spawnError}` };
  if (o.timedOut) {
    return {
      ok: false,
      tried: [],
      error: `the WebGPU probe did not answer within ${o.timeoutMs >= 1000 ? `${(o.timeoutMs / 1000).toFixed(0)} s` : `${o.timeoutMs} ms`} (a GPU driver hang?) and was killed${stderrHint}. Set SHARDWISE_PROBE_TIMEOUT_MS to wait longer.`,
    };
  }
  if (o.signal) return { ok: false, tried: [], error: `the WebGPU probe crashed (${o.signal}) while loading the GPU driver${stderrHint}` };
  if (o.code !== 0) return { ok: false, tried: [], error: `the WebGPU probe failed with exit code ${o.code}${stderrHint}` };
  let json: unknown;
  try {
    json = JSON.parse(lastLine(o.stdout));
  } catch {
    return { ok: false, tried: [], error: `the WebGPU probe printed no JSON result${stderrHint}` };
  }
  const parsed = DeviceProbeResultSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      tried: [],
      error: `the WebGPU probe's answer does not match the protocol (${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'})`,
    };
  }
  return { ok: true, adapters: parsed.data.adapters, tried: parsed.data.tried };
}

function probeTimeoutMs(): number {
  const v = Number(process.env.SHARDWISE_PROBE_TIMEOUT_MS);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_PROBE_TIMEOUT_MS;
}

/** Run the probe in a child process and collect how it ended. */
function runProbe(timeoutMs: number): Promise<ProbeOutcome> {
  // dist/src-main/machine/devices.js -> dist/workers/cli/probe-devices.js
  const script = fileURLToPath(new URL('../../workers/cli/probe-devices.js', import.meta.url));
  const base = { code: null, signal: null, timedOut: false, timeoutMs, stdout: '', stderr: '' };
  if (!existsSync(script)) {
    return Promise.resolve({ ...base, spawnError: `${script} is missing; run 'npm run build' first` });
  }
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-8192)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ ...base, spawnError: e.message });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ ...base, code, signal: timedOut ? null : signal, timedOut, stdout, stderr });
    });
  });
}

const numOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const strOrNull = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);

/**
 * Fill live NVIDIA figures systeminformation left empty from nvidia-smi's rows: the NVIDIA
 * controllers in order match nvidia-smi's indices (both follow PCI order); rows with no such
 * controller are added.
 */
export function withNvidiaSmi(controllers: SystemGpu[], smi: NvidiaSmiGpu[]): SystemGpu[] {
  if (!smi.length) return controllers;
  const out = controllers.map((c) => ({ ...c }));
  const nvidia = out.filter((c) => /nvidia/i.test(`${c.vendor} ${c.model}`));
  for (const row of smi) {
    let c = nvidia[row.index];
    if (!c) {
      c = {
        index: out.length,
        vendor: 'NVIDIA',
        model: row.name,
        vramMiB: row.memoryTotalMiB,
        driver: null,
        bus: null,
        busAddress: row.busId,
        utilizationPct: null,
        memoryUsedMiB: null,
        memoryTotalMiB: null,
        temperatureC: null,
        powerDrawW: null,
      };
      out.push(c);
    }
    c.driver ??= row.driver;
    c.vramMiB ??= row.memoryTotalMiB;
    c.utilizationPct ??= row.utilizationPct;
    c.memoryUsedMiB ??= row.memoryUsedMiB;
    c.memoryTotalMiB ??= row.memoryTotalMiB;
    c.temperatureC ??= row.temperatureC;
    c.powerDrawW ??= row.powerDrawW;
  }
  return out;
}

async function systemGpus(): Promise<DevicesReport['system']> {
  const [si, smi] = await Promise.all([siGpus(), queryNvidiaSmi()]);
  return { ...si, controllers: withNvidiaSmi(si.controllers, smi) };
}

async function siGpus(): Promise<DevicesReport['system']> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${SYSTEM_TIMEOUT_MS / 1000} s`)), SYSTEM_TIMEOUT_MS);
    timer.unref();
  });
  try {
    const g = await Promise.race([si.graphics(), timeout]);
    const controllers = g.controllers.map((c, index): SystemGpu => ({
      index,
      vendor: c.vendor ?? '',
      model: c.model ?? c.name ?? '',
      vramMiB: numOrNull(c.vram),
      driver: strOrNull(c.driverVersion),
      bus: strOrNull(c.bus),
      busAddress: strOrNull(c.busAddress ?? c.pciBus),
      utilizationPct: numOrNull(c.utilizationGpu),
      memoryUsedMiB: numOrNull(c.memoryUsed),
      memoryTotalMiB: numOrNull(c.memoryTotal),
      temperatureC: numOrNull(c.temperatureGpu),
      powerDrawW: numOrNull(c.powerDraw),
    }));
    return { source: 'systeminformation', controllers };
  } catch (e) {
    return {
      source: 'systeminformation',
      controllers: [],
      error: `systeminformation could not list the GPUs: ${e instanceof Error ? e.message : String(e)}`,
    };
  } finally {
    clearTimeout(timer);
  }
}

const tokens = (s: string): Set<string> =>
  new Set(
    s
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter((t) => t.length > 1),
  );

/**
 * Which system GPU a hardware adapter drives. WebGPU reports a vendor ("nvidia") and a device
 * name; the OS reports a vendor ("NVIDIA Corporation") and a model ("GH100 [H200]"). Match the
 * vendor, then prefer a model sharing a name token; with one GPU of that vendor, take it.
 */
export function matchSystemGpu(a: AdapterReport, controllers: SystemGpu[]): number | null {
  if (a.isSoftware) return null;
  const vendor = a.vendor.toLowerCase();
  const sameVendor = controllers.filter((c) => vendor !== '' && `${c.vendor} ${c.model}`.toLowerCase().includes(vendor));
  if (sameVendor.length === 0) return null;
  const name = tokens(`${a.device} ${a.description} ${a.architecture}`);
  name.delete(vendor);
  const byModel = sameVendor.filter((c) => [...tokens(c.model)].some((t) => name.has(t)));
  if (byModel.length >= 1) return byModel[0]!.index;
  return sameVendor.length === 1 ? sameVendor[0]!.index : null;
}

export async function collectDevices(): Promise<DevicesReport> {
  const timeoutMs = probeTimeoutMs();
  const t0 = performance.now();
  const [outcome, system] = await Promise.all([
    runProbe(timeoutMs).then((o) => ({ o, ms: Math.round(performance.now() - t0) })),
    systemGpus(),
  ]);
  const reading = readProbe(outcome.o);
  const adapters: DeviceEntry[] = reading.ok
    ? reading.adapters.map((a) => ({ ...a, systemGpu: matchSystemGpu(a, system.controllers) }))
    : [];
  const probe: DevicesReport['probe'] = reading.ok ? { ok: true, ms: outcome.ms } : { ok: false, ms: outcome.ms, error: reading.error };
  return { adapters, tried: reading.tried, probe, system };
}
