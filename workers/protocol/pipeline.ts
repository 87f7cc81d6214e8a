// Pipeline facts the ranks and the controller share. Pure: no network, no device.

/** Bubble fraction of a synchronous pipeline flush in theory, GPipe and 1F1B alike: (p-1)/(m+p-1) for p stages and m micro-batches. */
export function theoreticalBubble(p: number, m: number): number {
  return (p - 1) / (m + p - 1);
}
