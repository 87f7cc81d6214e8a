// The device layer: find WebGPU adapters through Dawn's node binding, fall back to a
// SwiftShader Vulkan driver when the machine has no hardware adapter, and open a device.
// Dawn reads VK_ICD_FILENAMES when each instance is created, so the fallback can be tried
// in-process after the default probe found nothing.
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { create, globals } from 'webgpu';
import { selectAdapter } from '../protocol/adapter-select.js';
import { sleepBetweenDawnPolls } from './dawn-poll.js';

Object.assign(globalThis, globals);

export interface AdapterReport {
  index: number;
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  backend: string;
  isSoftware: boolean;
  /** where the driver came from: the system's Vulkan/Metal/D3D loader or a SwiftShader ICD file */
  source: string;
  limits: Record<string, number>;
  features: string[];
}

export interface OpenedDevice {
  adapter: GPUAdapter;
  device: GPUDevice;
  report: AdapterReport;
  /** environment a child process needs to see the same adapter (VK_ICD_FILENAMES for SwiftShader) */
  env: Record<string, string>;
}

export class DeviceError extends Error {
  override name = 'DeviceError';
}

const LIMIT_KEYS = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxStorageBuffersPerShaderStage',
  'maxUniformBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'minStorageBufferOffsetAlignment',
  'minUniformBufferOffsetAlignment',
] as const;

/** SwiftShader ICD manifests we know how to find: Debian chromium's, and Electron's dist. */
export function swiftShaderCandidates(): string[] {
  const out = ['/usr/lib/chromium/vk_swiftshader_icd.json'];
  try {
    const require = createRequire(import.meta.url);
    const electronPkg = require.resolve('electron/package.json');
    out.push(path.join(path.dirname(electronPkg), 'dist', 'vk_swiftshader_icd.json'));
  } catch {
    // electron not installed: only the system candidates
  }
  if (process.env.SHARDWISE_SWIFTSHADER_ICD) out.unshift(process.env.SHARDWISE_SWIFTSHADER_ICD);
  return out;
}

function isSoftwareInfo(info: GPUAdapterInfo): boolean {
  const text = `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  const fallback = (info as GPUAdapterInfo & { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
  return fallback || /swiftshader|llvmpipe|lavapipe|software|warp/.test(text);
}

function backendOf(info: GPUAdapterInfo): string {
  const text = `${info.description} ${info.architecture}`.toLowerCase();
  if (text.includes('swiftshader') || text.includes('vulkan')) return 'vulkan';
  if (process.platform === 'darwin') return 'metal';
  if (process.platform === 'win32') return 'd3d12';
  return 'vulkan';
}

function report(adapter: GPUAdapter, index: number, source: string): AdapterReport {
  const info = adapter.info;
  const limits: Record<string, number> = {};
  for (const k of LIMIT_KEYS) limits[k] = Number((adapter.limits as unknown as Record<string, number>)[k]);
  return {
    index,
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    backend: backendOf(info),
    isSoftware: isSoftwareInfo(info),
    source,
    limits,
    features: [...adapter.features].map(String).sort(),
  };
}

interface Found {
  /** the adapter of the probe; a device consumes an adapter, so openDevice asks `gpu` again */
  adapter: GPUAdapter;
  gpu: GPU;
  powerPreference: GPUPowerPreference;
  report: AdapterReport;
  env: Record<string, string>;
}

/**
 * Dawn instances must outlive their adapters and devices: once the GPU object is garbage
 * collected, its devices stop processing events (work-done promises never resolve, or the
 * process aborts). Keep every instance we create for the life of the process.
 */
const liveInstances: GPU[] = [];

/** Dawn hands out one adapter per power preference; ask for both and deduplicate. */
async function probeInstance(source: string, env: Record<string, string>, start: number): Promise<Found[]> {
  const gpu = create([]);
  liveInstances.push(gpu);
  const found: Found[] = [];
  const seen = new Set<string>();
  for (const powerPreference of ['high-performance', 'low-power'] as const) {
    let adapter: GPUAdapter | null;
    try {
      adapter = await gpu.requestAdapter({ powerPreference });
    } catch {
      adapter = null;
    }
    if (!adapter) continue;
    const key = `${adapter.info.vendor}|${adapter.info.device}|${adapter.info.description}`;
    if (seen.has(key)) continue;
    seen.add(key);
    found.push({ adapter, gpu, powerPreference, report: report(adapter, start + found.length, source), env });
  }
  return found;
}

/** On Linux, a system probe with no Vulkan ICD manifest installed only prints loader warnings. */
function systemHasVulkanDrivers(): boolean {
  if (process.platform !== 'linux') return true;
  const dirs = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d', '/usr/local/etc/vulkan/icd.d'];
  if (process.env.HOME) dirs.push(path.join(process.env.HOME, '.local/share/vulkan/icd.d'));
  return dirs.some((d) => {
    try {
      return readdirSync(d).some((f) => f.endsWith('.json'));
    } catch {
      return false;
    }
  });
}

let cached: { found: Found[]; tried: string[] } | undefined;

/**
 * Every adapter this process can use. Hardware adapters come first; SwiftShader is only
 * loaded when the system offers no hardware adapter (or SHARDWISE_FORCE_SWIFTSHADER=1).
 */
export async function listAdapters(): Promise<{ found: Found[]; tried: string[] }> {
  if (cached) return cached;
  const tried: string[] = [];
  let found: Found[] = [];
  const forceSoftware = process.env.SHARDWISE_FORCE_SWIFTSHADER === '1';
  const presetIcd = process.env.VK_ICD_FILENAMES;
  if (!forceSoftware && !presetIcd && !systemHasVulkanDrivers()) {
    tried.push('the system GPU drivers (no Vulkan driver manifest installed)');
  } else if (!forceSoftware) {
    tried.push(presetIcd ? `Vulkan ICD from VK_ICD_FILENAMES=${presetIcd}` : 'the system GPU drivers');
    found = await probeInstance(
      presetIcd ? `VK_ICD_FILENAMES=${presetIcd}` : 'system',
      presetIcd ? { VK_ICD_FILENAMES: presetIcd } : {},
      0,
    );
  }
  if (!found.some((f) => !f.report.isSoftware)) {
    for (const icd of swiftShaderCandidates()) {
      if (!existsSync(icd)) {
        tried.push(`SwiftShader at ${icd} (not installed)`);
        continue;
      }
      tried.push(`SwiftShader at ${icd}`);
      process.env.VK_ICD_FILENAMES = icd;
      const soft = await probeInstance(`swiftshader:${icd}`, { VK_ICD_FILENAMES: icd }, found.length);
      if (presetIcd === undefined) delete process.env.VK_ICD_FILENAMES;
      else process.env.VK_ICD_FILENAMES = presetIcd;
      const known = new Set(found.map((f) => f.report.description));
      found.push(...soft.filter((f) => !known.has(f.report.description)));
      if (soft.length > 0) break;
    }
  }
  found.forEach((f, i) => (f.report.index = i));
  cached = { found, tried };
  return cached;
}

/** Pick by index ("0") or by a case-insensitive substring of the name; default: first hardware adapter. */
export async function openDevice(selector?: string | number): Promise<OpenedDevice> {
  const { found, tried } = await listAdapters();
  if (found.length === 0) {
    throw new DeviceError(
      `no WebGPU adapter found; tried: ${tried.join('; ')}. ` +
        "Install a GPU driver with Vulkan support, or Debian's chromium package (apt-get install chromium) for the SwiftShader software adapter.",
    );
  }
  let pick: Found | undefined;
  if (selector === undefined || selector === '') {
    pick = found.find((f) => !f.report.isSoftware) ?? found[0];
  } else {
    const r = selectAdapter(
      selector,
      found.map((f) => f.report),
    );
    if ('error' in r) throw new DeviceError(r.error);
    pick = found[r.index]!;
  }
  // the software adapter's work runs on this CPU: Dawn must not spin a core while it waits for it
  if (pick.report.isSoftware) sleepBetweenDawnPolls();
  const a = (await pick.gpu.requestAdapter({ powerPreference: pick.powerPreference })) ?? pick.adapter;
  const requiredLimits: Record<string, number> = {};
  for (const k of [
    'maxBufferSize',
    'maxStorageBufferBindingSize',
    'maxStorageBuffersPerShaderStage',
    'maxComputeWorkgroupStorageSize',
    'maxComputeInvocationsPerWorkgroup',
    'maxComputeWorkgroupSizeX',
    'maxComputeWorkgroupSizeY',
  ] as const) {
    requiredLimits[k] = Number((a.limits as unknown as Record<string, number>)[k]);
  }
  // shader-f16 where the adapter has it: fp16 kernels then compute on native f16 (kernels/source.ts)
  const requiredFeatures: GPUFeatureName[] = a.features.has('shader-f16') ? ['shader-f16'] : [];
  const device = await a.requestDevice({ requiredLimits, requiredFeatures });
  device.addEventListener('uncapturederror', (ev) => {
    const e = (ev as GPUUncapturedErrorEvent).error;
    process.stderr.write(`shardwise: WebGPU error on ${pick!.report.description}: ${e.message}\n`);
  });
  return { adapter: a, device, report: pick.report, env: pick.env };
}
