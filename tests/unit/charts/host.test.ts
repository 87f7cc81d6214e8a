// Host CPU and RAM: the sampler writes one row a second per machine into host.jsonl (its
// first, since-boot load reading dropped), the run store reads them back, and the charts draw
// one line per machine with RAM's total dashed.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { HostRow } from '../../../common/api/index.js';
import { hostCpuChartOption, hostMachines, hostMemoryChartOption } from '../../../common/charts/index.js';
import { ControllerService } from '../../../src-main/controller/service.js';
import { HOST_FILE, HostSampler, hostSources } from '../../../src-main/runs/host-sampler.js';
import { cpuLoadSinceLast, sampleHost } from '../../../workers/protocol/host-load.js';
import { writePipelineRun } from '../../e2e/run-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'host-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const GiB = 1024 ** 3;

describe('host sampler', () => {
  it('samples this machine through systeminformation: a load in 0..100 and RAM in use below the total', async () => {
    const s = await sampleHost();
    expect(s.cpu_pct).toBeGreaterThanOrEqual(0);
    expect(s.cpu_pct).toBeLessThanOrEqual(100);
    expect(s.mem_total).toBeGreaterThan(0);
    expect(s.mem_used).toBeGreaterThan(0);
    expect(s.mem_used).toBeLessThanOrEqual(s.mem_total);
  });

  it('CPU load: busy ticks over all ticks of every core since the previous reading', () => {
    const cpus = (busy: number, idle: number) => [0, 1].map(() => ({ times: { user: busy / 2, nice: 0, sys: busy / 2, idle, irq: 0 } }));
    cpuLoadSinceLast(cpus(1000, 9000)); // the first reading: since boot
    expect(cpuLoadSinceLast(cpus(1300, 9100))).toBeCloseTo(75, 9); // +300 busy, +100 idle per core
    expect(cpuLoadSinceLast(cpus(1300, 9300))).toBe(0);
    expect(cpuLoadSinceLast(cpus(1300, 9300))).toBe(0); // no ticks passed: 0, not NaN
  });

  it('writes a row per tick after dropping the priming reading, stops when told, and the store reads the rows back', async () => {
    const dir = path.join(root, 'pp-run');
    writePipelineRun(dir);
    let n = 0;
    const sampler = new HostSampler(
      dir,
      [
        { machine: 'gpu-a', sample: () => Promise.resolve({ cpu_pct: 10 * n++, mem_used: 2 * GiB, mem_total: 8 * GiB }) },
        // an agent that does not answer `host` (an older one): its machine misses the points, the other keeps them
        { machine: 'old-agent', sample: () => Promise.reject(new Error('unknown method')) },
      ],
      20,
    ).start();
    await new Promise((r) => setTimeout(r, 200));
    sampler.stop();
    const lines = readFileSync(path.join(dir, HOST_FILE), 'utf8').trim().split('\n');
    await new Promise((r) => setTimeout(r, 60));
    expect(readFileSync(path.join(dir, HOST_FILE), 'utf8').trim().split('\n')).toHaveLength(lines.length); // stopped means stopped
    const rows = lines.map((l) => JSON.parse(l) as HostRow);
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows[0]!.cpu_pct).toBe(10); // the priming reading (0) is not written
    expect(rows.every((r) => r.mem_total === 8 * GiB && r.machine === 'gpu-a')).toBe(true);

    const service = new ControllerService({ runsRoot: root });
    const all = await service.call<'runs.host'>('runs.host', { runId: 'pp-run' });
    expect(all.rows).toEqual(rows);
    const later = await service.call<'runs.host'>('runs.host', { runId: 'pp-run', fromTime: rows[1]!.time + 1 });
    expect(later.rows.every((r) => r.time > rows[1]!.time)).toBe(true);
  });

  it("a run's machines: this one when a rank runs here, each agent once, by the name the topology shows", () => {
    const session = { request: () => Promise.resolve({ cpu_pct: 1, mem_used: 1, mem_total: 2 }) };
    const agent = { kind: 'agent' as const, machine: 'bench-b (10.0.0.2:7341)', session };
    expect(hostSources(undefined).map((s) => s.machine)).toEqual([hostname()]);
    expect(hostSources([{ kind: 'local' }, agent, agent]).map((s) => s.machine)).toEqual([hostname(), 'bench-b (10.0.0.2:7341)']);
    expect(hostSources([agent]).map((s) => s.machine)).toEqual(['bench-b (10.0.0.2:7341)']);
  });
});

describe('host charts', () => {
  const t0 = 1_700_000_000_000;
  const rows: HostRow[] = [0, 1, 2].flatMap((i) => [
    { time: t0 + i * 1000, machine: 'gpu-a', cpu_pct: 40 + i, mem_used: (10 + i) * GiB, mem_total: 64 * GiB },
    { time: t0 + i * 1000 + 5, machine: 'gpu-b', cpu_pct: 90, mem_used: 30 * GiB, mem_total: 32 * GiB },
  ]);

  it('one CPU line per machine against seconds since the first sample, on a 0..100 axis', () => {
    expect(hostMachines(rows)).toEqual(['gpu-a', 'gpu-b']);
    const o = hostCpuChartOption(rows) as { series: { name: string; data: number[][] }[]; yAxis: { max: number } };
    expect(o.series.map((s) => s.name)).toEqual(['gpu-a', 'gpu-b']);
    expect(o.series[0]!.data).toEqual([
      [0, 40],
      [1, 41],
      [2, 42],
    ]);
    expect(o.yAxis.max).toBe(100);
  });

  it('RAM in GiB per machine with its total dashed', () => {
    const o = hostMemoryChartOption(rows) as {
      series: { name: string; data: number[][]; lineStyle?: { type?: string } }[];
      yAxis: { name: string };
    };
    expect(o.yAxis.name).toBe('GiB');
    expect(o.series.map((s) => s.name)).toEqual(['gpu-a', 'gpu-a total', 'gpu-b', 'gpu-b total']);
    expect(o.series[0]!.data.map((p) => p[1])).toEqual([10, 11, 12]);
    expect(o.series[3]!.lineStyle?.type).toBe('dashed');
    expect(o.series[3]!.data[0]![1]).toBe(32);
  });

  it('no rows, no chart', () => {
    expect(hostCpuChartOption([])).toBeNull();
    expect(hostMemoryChartOption([])).toBeNull();
  });
});
