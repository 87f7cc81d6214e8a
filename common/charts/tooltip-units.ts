// Tooltip values with their unit and four significant digits ("2.443 MiB", not
// "2.4433975219726562"). ECharts takes a function here; the HTML report ships each as its source
// text (src-main/reports/html.ts OPTION_FUNCTIONS), so every one is self-contained: one per unit,
// the unit written into its body rather than captured.
type Fmt = (value: unknown) => string;

export const tooltipB: Fmt = (v) => (typeof v === 'number' ? `${Number(v.toPrecision(4)).toLocaleString('en-US')} B` : String(v ?? '—'));
export const tooltipKiB: Fmt = (v) =>
  typeof v === 'number' ? `${Number(v.toPrecision(4)).toLocaleString('en-US')} KiB` : String(v ?? '—');
export const tooltipMiB: Fmt = (v) =>
  typeof v === 'number' ? `${Number(v.toPrecision(4)).toLocaleString('en-US')} MiB` : String(v ?? '—');
export const tooltipGiB: Fmt = (v) =>
  typeof v === 'number' ? `${Number(v.toPrecision(4)).toLocaleString('en-US')} GiB` : String(v ?? '—');
export const tooltipTiB: Fmt = (v) =>
  typeof v === 'number' ? `${Number(v.toPrecision(4)).toLocaleString('en-US')} TiB` : String(v ?? '—');

/** every tooltip formatter, by name, for the report */
export const TOOLTIP_FORMATTERS = { tooltipB, tooltipKiB, tooltipMiB, tooltipGiB, tooltipTiB };

const BY_UNIT: Record<string, Fmt> = { B: tooltipB, KiB: tooltipKiB, MiB: tooltipMiB, GiB: tooltipGiB, TiB: tooltipTiB };

/** the formatter of a byte unit byteUnit() chose */
export function bytesTooltip(unit: string): Fmt {
  const f = BY_UNIT[unit];
  if (!f) throw new Error(`no tooltip formatter for the unit "${unit}"`);
  return f;
}

/** a time on a span chart's axis, rounded to the microsecond (a tooltip showed 9,041.891357421875) */
export const roundMs = (ms: number): number => Math.round(ms * 1000) / 1000;
