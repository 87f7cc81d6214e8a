import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError, type DevicesView } from '../../../common/api/index.js';
import type { DeviceCache } from '../../../src-main/controller/device-cache.js';
import { ControllerService } from '../../../src-main/controller/service.js';

// runs.advise through the controller's API entry (params checked on entry, the result on exit):
// a plan of this machine's one software adapter, and refusals carrying the request field.
const VIEW: DevicesView = {
  adapters: [
    {
      index: 0,
      vendor: 'google',
      architecture: 'swiftshader',
      device: 'swiftshader',
      description: 'SwiftShader Device (Subzero)',
      backend: 'vulkan',
      isSoftware: true,
      source: 'test',
      limits: {},
      features: [],
      systemGpu: null,
    },
  ],
  tried: [],
  probe: { ok: true, ms: 1 },
  system: { controllers: [] },
  probed_at: '2026-01-01T00:00:00.000Z',
};
const devices = { list: () => Promise.resolve(VIEW), start() {}, stop() {} } as unknown as DeviceCache;
// no stored profile: the plan says it uses the default speeds
const service = () =>
  new ControllerService({ runsRoot: mkdtempSync(path.join(tmpdir(), 'shardwise-advise-')), devices, profile: () => Promise.resolve(null) });

describe('runs.advise', () => {
  it('ranks the layouts of 4 ranks on the one adapter; says the speeds are the defaults', async () => {
    const r = await service().call<'runs.advise'>('runs.advise', { preset: 'small', batch_size: 8, seq_len: 128, devices: 4 });
    expect(r.profile.source).toBe('defaults');
    expect(r.notes.some((n) => n.includes('no machine profile is stored'))).toBe(true);
    expect(r.notes.some((n) => n.includes('4 ranks on 1 adapter(s)'))).toBe(true);
    expect(new Set(r.layouts.map((l) => l.layout.world))).toEqual(new Set([1, 2, 4]));
    expect(r.layouts.every((l) => l.ranks.every((k) => k.device === 'software adapter 0'))).toBe(true);
  });

  it('refuses a field as a ValidationError naming it', async () => {
    const s = service();
    const err = (p: Record<string, unknown>) =>
      s.call('runs.advise', p).then(
        () => null,
        (e: unknown) => e as ApiError,
      );
    // one head and one block: 7 rows split over no layout of 2 ranks (tiny's batch 6 on 4 ranks is planned on 2 and 3: tests/unit/advisor/plan.test.ts)
    const batch = await err({ model: { n_layer: 1, n_head: 1, d_model: 64, block_size: 64 }, batch_size: 7, seq_len: 64, devices: 2 });
    expect(batch).toBeInstanceOf(ApiError);
    expect(batch!.name).toBe('ValidationError');
    expect(batch!.field).toBe('batch_size');
    const device = await err({
      preset: 'tiny',
      batch_size: 8,
      seq_len: 64,
      placement: [{ machine: 'local' }, { machine: 'local', device: '3' }],
    });
    expect(device!.field).toBe('placement.1.device');
    expect(device!.message).toMatch(/unknown device "3": this machine's adapters are 0 \(SwiftShader Device \(Subzero\)\)/);
    const schema = await err({ preset: 'tiny', batch_size: 0, seq_len: 64 });
    expect(schema!.field).toBe('batch_size');
  });
});
