import { describe, expect, it } from 'vitest';
import { withNvidiaSmi, type SystemGpu } from '../../src-main/machine/devices.js';
import { parseNvidiaSmi } from '../../src-main/machine/nvidia-smi.js';

// nvidia-smi --query-gpu=...,--format=csv,noheader,nounits as an H200 and a consumer card print it;
// systeminformation's view of the H200 VM had every live field null.
const CSV = [
  '0, NVIDIA H200, 00000000:00:06.0, 580.159.04, 143771, 512, 37, 31, 118.45',
  '1, NVIDIA GeForce RTX 3060, 00000000:01:00.0, 580.159.04, 12288, [N/A], [Not Supported], 45, [N/A]',
  '',
].join('\n');

const empty = (over: Partial<SystemGpu>): SystemGpu => ({
  index: 0,
  vendor: '',
  model: '',
  vramMiB: null,
  driver: null,
  bus: null,
  busAddress: null,
  utilizationPct: null,
  memoryUsedMiB: null,
  memoryTotalMiB: null,
  temperatureC: null,
  powerDrawW: null,
  ...over,
});

describe('live NVIDIA figures from nvidia-smi', () => {
  it('parses the query rows, [N/A] and [Not Supported] as null', () => {
    const rows = parseNvidiaSmi(CSV);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toEqual({
      index: 0,
      name: 'NVIDIA H200',
      busId: '00000000:00:06.0',
      driver: '580.159.04',
      memoryTotalMiB: 143771,
      memoryUsedMiB: 512,
      utilizationPct: 37,
      temperatureC: 31,
      powerDrawW: 118.45,
    });
    expect(rows[1]!.memoryUsedMiB).toBeNull();
    expect(rows[1]!.utilizationPct).toBeNull();
    expect(rows[1]!.temperatureC).toBe(45);
    expect(parseNvidiaSmi('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.\n')).toEqual([]);
  });

  it('fills what systeminformation left empty, in PCI order, without overwriting what it had; adds GPUs it missed', () => {
    const si = [
      empty({ index: 0, vendor: 'Intel Corporation', model: 'UHD 630' }),
      empty({ index: 1, vendor: 'NVIDIA Corporation', model: 'GH100', vramMiB: 143156 }),
    ];
    const out = withNvidiaSmi(si, parseNvidiaSmi(CSV));
    expect(out[0]!.utilizationPct).toBeNull(); // the Intel GPU is not an nvidia-smi row
    expect(out[1]).toMatchObject({
      vramMiB: 143156,
      utilizationPct: 37,
      memoryUsedMiB: 512,
      memoryTotalMiB: 143771,
      temperatureC: 31,
      driver: '580.159.04',
    });
    expect(out[2]).toMatchObject({ index: 2, vendor: 'NVIDIA', model: 'NVIDIA GeForce RTX 3060', temperatureC: 45, utilizationPct: null });
    expect(withNvidiaSmi(si, [])).toEqual(si);
  });
});
