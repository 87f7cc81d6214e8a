// How every output names an emulated device (benchmarks: workers/protocol/emulate.ts): the
// CLI's lines, the dashboard's badge, the report. A run's config is data from its folder, so
// this reads it loosely; null means the run timed its real adapter.
export function emulatedLabel(config: unknown): string | null {
  const e = (config as { emulate?: { tflops?: number; profile?: string; shape?: { name?: string } } } | null | undefined)?.emulate;
  if (!e) return null;
  const device = e.tflops !== undefined ? `${e.tflops} TFLOP/s` : `profile ${e.profile ?? '?'}`;
  return `emulated device (${device})${e.shape?.name ? `, timing the ${e.shape.name} shape on a proxy model` : ''}`;
}
