// The device memory each rank of a run has, where this machine can tell: a rank on this machine
// runs on the adapter its placement names (an index or a name) or, with none named, on the only
// adapter there is; that adapter's system GPU reports its VRAM (systeminformation / nvidia-smi).
// A software adapter (SwiftShader) and ranks on other machines have no number here: the
// topology panel says so rather than guess.

/** What this needs of an adapter row (stores/devices.ts DeviceRow). */
export interface AdapterOfMachine {
  index: number;
  description: string;
  /** the system GPU it runs on, null for a software adapter */
  systemGpu: number | null;
}

export interface SystemGpuMemory {
  index: number;
  vramMiB: number | null;
  memoryTotalMiB?: number | null;
}

export function deviceMemoryOfRanks(
  world: number,
  placement: readonly { machine: string; device?: string }[] | undefined,
  adapters: readonly AdapterOfMachine[],
  gpus: readonly SystemGpuMemory[],
): Record<number, number> {
  const out: Record<number, number> = {};
  for (let rank = 0; rank < world; rank++) {
    const p = placement?.[rank];
    if (p && p.machine !== 'local') continue;
    const named = p?.device;
    const adapter =
      named === undefined
        ? adapters.length === 1
          ? adapters[0]
          : undefined
        : /^\d+$/.test(named)
          ? adapters.find((a) => a.index === Number(named))
          : adapters.find((a) => a.description.toLowerCase().includes(named.toLowerCase()));
    if (!adapter || adapter.systemGpu === null) continue;
    const gpu = gpus.find((g) => g.index === adapter.systemGpu);
    const mib = gpu?.memoryTotalMiB ?? gpu?.vramMiB;
    if (typeof mib === 'number' && mib > 0) out[rank] = mib * 2 ** 20;
  }
  return out;
}
