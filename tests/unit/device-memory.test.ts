// Which device size the topology panel may show for a rank (src-renderer/src/device-memory.ts):
// only a rank on this machine whose adapter is known and sits on a system GPU that reports VRAM.
import { describe, expect, it } from 'vitest';
import { deviceMemoryOfRanks } from '../../src-renderer/src/device-memory.js';

const adapter = (index: number, description: string, systemGpu: number | null) => ({
  index,
  description,
  backend: 'vulkan',
  isSoftware: systemGpu === null,
  source: 'system',
  systemGpu,
});
const GiB = 2 ** 30;

describe('deviceMemoryOfRanks', () => {
  const gpus = [
    { index: 0, vramMiB: 24_576, memoryTotalMiB: null },
    { index: 1, vramMiB: null, memoryTotalMiB: 8_192 },
  ];
  const adapters = [adapter(0, 'NVIDIA GeForce RTX 4090', 0), adapter(1, 'NVIDIA RTX A4000', 1), adapter(2, 'SwiftShader Device', null)];
  it('by adapter index or name from the placement; a software adapter and a remote rank have none', () => {
    const placement = [
      { machine: 'local', device: '0' },
      { machine: 'local', device: 'a4000' },
      { machine: 'local', device: '2' },
      { machine: '10.0.0.2:7341', device: '0' },
    ];
    expect(deviceMemoryOfRanks(4, placement, adapters, gpus)).toEqual({ 0: 24 * GiB, 1: 8 * GiB });
  });
  it('without a placement, only when this machine has a single adapter (the one every rank then uses)', () => {
    expect(deviceMemoryOfRanks(2, undefined, adapters, gpus)).toEqual({});
    expect(deviceMemoryOfRanks(2, undefined, [adapters[0]!], gpus)).toEqual({ 0: 24 * GiB, 1: 24 * GiB });
    expect(deviceMemoryOfRanks(2, undefined, [adapters[2]!], gpus)).toEqual({});
  });
});
