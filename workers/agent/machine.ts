// What a paired agent reports about its machine: identity and size, and its devices exactly as
// `shardwise devices --json` sees them there (system GPUs joined with WebGPU adapters, probed
// in a child process so a driver crash or hang never takes the agent down).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { type AgentDevices, AgentDevicesSchema, type Machine } from '../protocol/agent.js';

const BIN = fileURLToPath(new URL('../../../bin/shardwise.js', import.meta.url));
const PACKAGE = fileURLToPath(new URL('../../../package.json', import.meta.url));
const DEVICES_TIMEOUT_MS = 60_000;
const DEVICES_CACHE_MS = 10_000;

export function machineInfo(agentId: string, agentName: string): Machine {
  let version = 'unknown';
  try {
    version = String(JSON.parse(readFileSync(PACKAGE, 'utf8')).version);
  } catch {
    // a packaged agent without its package.json still answers
  }
  return {
    agentId,
    agentName,
    hostname: os.hostname(),
    platform: os.platform(),
    arch: os.arch(),
    cpus: os.cpus().length,
    memoryBytes: os.totalmem(),
    version,
  };
}

let cached: { at: number; value: Promise<AgentDevices> } | null = null;

/** This machine's devices; refreshed at most every 10 s however often a controller asks. */
export function machineDevices(): Promise<AgentDevices> {
  if (cached && Date.now() - cached.at < DEVICES_CACHE_MS) return cached.value;
  const value = new Promise<AgentDevices>((resolve, reject) => {
    execFile(process.execPath, [BIN, 'devices', '--json'], { timeout: DEVICES_TIMEOUT_MS, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      const text = stdout.trim();
      if (!text) {
        reject(new Error(`device probe failed: ${(stderr || err?.message || 'no output').trim().split('\n')[0]}`));
        return;
      }
      const parsed = AgentDevicesSchema.safeParse(JSON.parse(text));
      if (parsed.success) resolve(parsed.data);
      else reject(new Error(`device probe printed an unexpected report: ${parsed.error.issues[0]?.message}`));
    });
  });
  cached = { at: Date.now(), value };
  value.catch(() => {
    cached = null;
  });
  return value;
}
