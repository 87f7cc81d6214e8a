import { describe, expect, it } from 'vitest';
import { type DevicesView, LiveDevicesViewSchema } from '../../common/api/index.js';
import { parseNvidiaSmi } from '../../src-main/machine/nvidia-smi.js';
import { LiveDevices, liveControllers } from '../../src-main/controller/live-devices.js';

// devices.live: the probe's system GPUs with nvidia-smi's live figures read again, cached ~2 s.
// The rows are `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` as an H200 and a
// consumer card print them.
const csv = (util: number, used: number, temp: number) =>
  [
    `0, NVIDIA H200, 00000000:00:06.0, 580.159.04, 143771, ${used}, ${util}, ${temp}, 118.45`,
    '1, NVIDIA GeForce RTX 3060, 00000000:01:00.0, 580.159.04, 12288, [N/A], [Not Supported], 45, [N/A]',
    '',
  ].join('\n');

const gpu = (over: Partial<DevicesView['system']['controllers'][number]>) => ({
  index: 0,
  vendor: '',
  model: '',
  vramMiB: null,
  driver: null,
  utilizationPct: null,
  memoryUsedMiB: null,
  memoryTotalMiB: null,
  temperatureC: null,
  ...over,
});
const probed: DevicesView = {
  adapters: [],
  tried: [],
  probe: { ok: true, ms: 900 },
  system: {
    controllers: [
      gpu({ index: 0, vendor: 'Intel Corporation', model: 'UHD 630' }),
      gpu({
        index: 1,
        vendor: 'NVIDIA Corporation',
        model: 'GH100 [H200]',
        utilizationPct: 37,
        memoryUsedMiB: 512,
        memoryTotalMiB: 143771,
        temperatureC: 31,
      }),
      gpu({
        index: 2,
        vendor: 'NVIDIA',
        model: 'NVIDIA GeForce RTX 3060',
        utilizationPct: 5,
        memoryUsedMiB: 300,
        memoryTotalMiB: 12288,
        temperatureC: 40,
      }),
    ],
  },
  probed_at: '2026-11-29T22:00:00.000Z',
};

describe('devices.live', () => {
  it('lays the live figures over the probed GPUs in PCI order; [N/A] keeps the probed value; other vendors untouched', () => {
    const out = liveControllers(probed.system.controllers, parseNvidiaSmi(csv(91, 70_144, 58)));
    expect(out[0]).toEqual(probed.system.controllers[0]);
    expect(out[1]).toMatchObject({
      model: 'GH100 [H200]',
      utilizationPct: 91,
      memoryUsedMiB: 70_144,
      memoryTotalMiB: 143771,
      temperatureC: 58,
      powerDrawW: 118.45,
    });
    expect(out[2]).toMatchObject({ utilizationPct: 5, memoryUsedMiB: 300, temperatureC: 45 });
    expect(probed.system.controllers[1]!.utilizationPct).toBe(37); // the probe's view is not changed
  });

  it('one nvidia-smi query per 2 s for every caller; without nvidia-smi the probe values, said so', async () => {
    let queries = 0;
    let t = 1_000_000;
    const readings = [csv(10, 1000, 40), csv(99, 2000, 61)];
    const live = new LiveDevices(
      async () => probed,
      async () => parseNvidiaSmi(readings[queries++]!),
      2000,
      () => t,
    );
    const [a, b] = await Promise.all([live.read(), live.read()]);
    expect(queries).toBe(1);
    expect(b).toBe(a);
    expect(LiveDevicesViewSchema.parse(a)).toMatchObject({
      source: 'nvidia-smi',
      probed_at: probed.probed_at,
      taken_at: new Date(1_000_000).toISOString(),
    });
    expect(a.controllers[1]!.utilizationPct).toBe(10);
    t += 1999;
    expect((await live.read()).controllers[1]!.utilizationPct).toBe(10);
    expect(queries).toBe(1);
    t += 1;
    expect((await live.read()).controllers[1]).toMatchObject({ utilizationPct: 99, temperatureC: 61 });
    expect(queries).toBe(2);

    const none = await new LiveDevices(
      async () => probed,
      async () => [],
      2000,
      () => t,
    ).read();
    expect(none.source).toBe('probe');
    expect(none.controllers).toEqual(probed.system.controllers);
  });
});
