// The keys where two runs' resolved configs (config.json) differ, as dotted paths
// ("parallel.strategy", "train.lr"): what a comparison must say first, since a loss gap means
// nothing until one knows what changed. Keys every run shares with one value are left out, and
// so is run_dir (each run's own folder, always different).
const IGNORED = new Set(['run_dir']);

export interface ConfigDiffRow {
  key: string;
  /** one per compared config: the value as JSON text, or undefined where that config lacks the key */
  values: (string | undefined)[];
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A config flattened to dotted keys; arrays and scalars are leaves (as JSON text). */
export function flattenConfig(config: unknown, prefix = '', out: Map<string, string> = new Map()): Map<string, string> {
  if (!isPlainObject(config)) {
    if (prefix) out.set(prefix, JSON.stringify(config));
    return out;
  }
  for (const [k, v] of Object.entries(config)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (IGNORED.has(key)) continue;
    if (isPlainObject(v) && Object.keys(v).length > 0) flattenConfig(v, key, out);
    else out.set(key, JSON.stringify(v));
  }
  return out;
}

/** The differing keys of the configs, sorted by key. */
export function configDiff(configs: readonly unknown[]): ConfigDiffRow[] {
  const flat = configs.map((c) => flattenConfig(c));
  const keys = new Set(flat.flatMap((f) => [...f.keys()]));
  const rows: ConfigDiffRow[] = [];
  for (const key of [...keys].sort()) {
    const values = flat.map((f) => f.get(key));
    if (values.some((v) => v !== values[0])) rows.push({ key, values });
  }
  return rows;
}
