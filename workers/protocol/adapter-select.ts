// Which adapter a device selector names: an index ("0") or a case-insensitive substring of
// "vendor device description". One rule for the rank that opens the device (workers/gpu) and the
// controller that checks a placement before launching (src-main/launch/placement.ts).

export interface AdapterName {
  vendor: string;
  device: string;
  description: string;
}

/** the index into `adapters` the selector picks, or why none does (a sentence that says what to do) */
export function selectAdapter(selector: string | number, adapters: readonly AdapterName[]): { index: number } | { error: string } {
  if (typeof selector === 'number' || /^\d+$/.test(selector)) {
    const i = Number(selector);
    if (i < adapters.length) return { index: i };
    return {
      error: `no adapter with index ${selector}; there are ${adapters.length} (0..${adapters.length - 1}). Run 'shardwise devices' to list them.`,
    };
  }
  const needle = selector.toLowerCase();
  const i = adapters.findIndex((a) => `${a.vendor} ${a.device} ${a.description}`.toLowerCase().includes(needle));
  if (i >= 0) return { index: i };
  return { error: `no adapter matches "${selector}"; available: ${adapters.map((a) => a.description).join(', ')}` };
}
