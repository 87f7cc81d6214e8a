// `shardwise devices [--json]` as a user runs it: the built CLI in a child process, which in
// turn probes WebGPU in its own child. Needs `npm run build` (dist/) first.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type DevicesReport, matchSystemGpu, readProbe, type SystemGpu } from '../../src-main/machine/devices.js';
import type { AdapterReport } from '../../workers/protocol/devices.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cli = path.join(root, 'bin/shardwise.js');
const built = existsSync(path.join(root, 'dist/src-main/cli/main.js')) && existsSync(path.join(root, 'dist/workers/cli/probe-devices.js'));

function shardwise(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: root, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const lines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');

describe('shardwise devices (built CLI)', () => {
  it('is built (dist/src-main/cli/main.js, dist/workers/cli/probe-devices.js)', () => {
    expect(built, "run 'npm run build' first: these tests run the compiled CLI").toBe(true);
  });

  it('--json prints one JSON object with adapters (limits, features, driver source) and the systeminformation section', () => {
    const r = shardwise(['devices', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(lines(r.stdout)).toHaveLength(1);
    const report = JSON.parse(r.stdout) as DevicesReport;
    expect(report.probe.ok).toBe(true);
    expect(report.adapters.length).toBeGreaterThanOrEqual(1);
    for (const a of report.adapters) {
      expect(a.description.length).toBeGreaterThan(0);
      expect(a.limits.maxBufferSize).toBeGreaterThan(0);
      expect(a.limits.maxStorageBufferBindingSize).toBeGreaterThan(0);
      expect(a.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(64);
      expect(Array.isArray(a.features)).toBe(true);
      expect(a.source.length).toBeGreaterThan(0);
      if (a.isSoftware) expect(a.systemGpu).toBeNull();
    }
    expect(report.tried.length).toBeGreaterThanOrEqual(1);
    expect(report.system.source).toBe('systeminformation');
    expect(Array.isArray(report.system.controllers)).toBe(true);
    // This machine has no GPU: the probe falls back to SwiftShader and says where it came from.
    if (!report.adapters.some((a) => !a.isSoftware)) {
      const soft = report.adapters.find((a) => a.isSoftware && /swiftshader/i.test(a.description));
      expect(soft, JSON.stringify(report.adapters)).toBeDefined();
      expect(soft!.source).toMatch(/^swiftshader:.*vk_swiftshader_icd\.json$/);
    }
  });

  it('SHARDWISE_FORCE_SWIFTSHADER=1: a SwiftShader adapter, isSoftware true, description names SwiftShader', () => {
    const r = shardwise(['devices', '--json'], { SHARDWISE_FORCE_SWIFTSHADER: '1' });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as DevicesReport;
    const soft = report.adapters.filter((a) => a.isSoftware && /swiftshader/i.test(a.description));
    expect(soft.length, JSON.stringify(report.adapters)).toBeGreaterThanOrEqual(1);
    expect(report.tried.some((t) => /SwiftShader at .*vk_swiftshader_icd\.json/.test(t))).toBe(true);
  });

  it('the human listing says which adapter is software (SwiftShader) and where its driver came from', () => {
    const r = shardwise(['devices'], { SHARDWISE_FORCE_SWIFTSHADER: '1' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^WebGPU adapters/);
    expect(r.stdout).toMatch(/\[0\] .*SwiftShader.*software \(SwiftShader/);
    expect(r.stdout).toMatch(/driver: SwiftShader Vulkan ICD \S*vk_swiftshader_icd\.json/);
    expect(r.stdout).toMatch(/limits: buffer \d+ [KMGT]?i?B/);
    expect(r.stdout).toContain('System GPUs (systeminformation)');
  });

  it('an unknown flag is one error line on stderr and exit code 2', () => {
    const r = shardwise(['devices', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(/unknown flag '--bogus'.*usage: shardwise devices \[--json\]/);
  });

  it('a probe that does not answer in time (SHARDWISE_PROBE_TIMEOUT_MS=1) is killed and reported, exit 1', () => {
    const r = shardwise(['devices', '--json'], { SHARDWISE_PROBE_TIMEOUT_MS: '1' });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as DevicesReport;
    expect(report.probe.ok).toBe(false);
    expect(report.adapters).toEqual([]);
    expect(report.system.source).toBe('systeminformation');
    expect(lines(r.stderr)).toHaveLength(1);
    expect(r.stderr).toMatch(/did not answer within 1 ms .*was killed.*SHARDWISE_PROBE_TIMEOUT_MS/);
  });
});

describe('reading the probe child', () => {
  const base = { code: 0, signal: null, timedOut: false, timeoutMs: 20_000, stdout: '', stderr: '' };
  const adapter: AdapterReport = {
    index: 0,
    vendor: 'nvidia',
    architecture: 'hopper',
    device: 'nvidia-h200',
    description: 'NVIDIA: 550.54',
    backend: 'vulkan',
    isSoftware: false,
    source: 'system',
    limits: { maxBufferSize: 1 << 30 },
    features: [],
  };

  it('a driver crash (SIGSEGV) names the signal and the last stderr line', () => {
    const r = readProbe({ ...base, code: null, signal: 'SIGSEGV', stderr: 'loading libvulkan\nvkCreateInstance failed\n' });
    expect(r).toEqual({ ok: false, tried: [], error: expect.stringMatching(/crashed \(SIGSEGV\).*vkCreateInstance failed/) });
  });
  it('a non-zero exit, garbage on stdout and a wrong shape are each one clear error', () => {
    expect(readProbe({ ...base, code: 3, stderr: 'boom' })).toMatchObject({ ok: false, error: expect.stringMatching(/exit code 3.*boom/) });
    expect(readProbe({ ...base, stdout: 'not json' })).toMatchObject({ ok: false, error: expect.stringMatching(/no JSON result/) });
    expect(readProbe({ ...base, stdout: JSON.stringify({ adapters: [{ index: 'x' }], tried: [] }) })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/does not match the protocol \(adapters\.0\./),
    });
  });
  it('a good answer passes the schema', () => {
    const r = readProbe({
      ...base,
      stdout: `warning from the loader\n${JSON.stringify({ adapters: [adapter], tried: ['the system GPU drivers'] })}\n`,
    });
    expect(r).toEqual({ ok: true, adapters: [adapter], tried: ['the system GPU drivers'] });
  });

  it('joins a hardware adapter to its system GPU by vendor and model; software adapters join nothing', () => {
    const gpu = (index: number, vendor: string, model: string): SystemGpu => ({
      index,
      vendor,
      model,
      vramMiB: 143771,
      driver: '550.54',
      bus: 'PCI',
      busAddress: null,
      utilizationPct: 0,
      memoryUsedMiB: 1,
      memoryTotalMiB: 143771,
      temperatureC: 30,
      powerDrawW: 70,
    });
    const controllers = [gpu(0, 'Intel Corporation', 'UHD Graphics 630'), gpu(1, 'NVIDIA Corporation', 'GH100 [H200 SXM 141GB]')];
    expect(matchSystemGpu(adapter, controllers)).toBe(1);
    expect(matchSystemGpu({ ...adapter, isSoftware: true }, controllers)).toBeNull();
    expect(matchSystemGpu({ ...adapter, vendor: 'amd' }, controllers)).toBeNull();
  });
});
