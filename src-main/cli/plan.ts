// `shardwise plan`: the strategy advisor on the command line. The same request as runs.advise
// (common/advisor/types.ts), from flags; prints the ranked layouts as a table, or with --json the
// AdviseResult. A refused field is one line on stderr naming its flag, and exit code 2.
import { parseArgs } from 'node:util';
import { AdviseRequestSchema, type AdviseRequest, type AdviseResult } from '../../common/advisor/types.js';
import { formatBytes } from '../../common/advisor/plan.js';
import { layoutName } from '../../common/advisor/layouts.js';
import { DevicesViewSchema } from '../../common/api/index.js';
import { AdviceError, adviseRequest, type AdviseDeps } from '../controller/advise.js';
import { parsePlacement, PlacementError } from '../launch/placement.js';
import { collectDevices } from '../machine/devices.js';
import { loadMachineProfile } from '../machine/profile-store.js';
import { CliError } from './errors.js';

export const PLAN_USAGE =
  'shardwise plan --preset NAME|--model JSON --batch-size B --seq-len T [--precision fp32|bf16|fp16] [--placement local,HOST:PORT@ADAPTER,...|--devices N] [--what-if devices=N,memory_gb=G,tflops=F,link_gbps=L,latency_us=U | devices=N,device_class=ID,link_gbps=L,latency_us=U] [--json]';

const FLAGS = {
  preset: { type: 'string' },
  model: { type: 'string' },
  'batch-size': { type: 'string' },
  'seq-len': { type: 'string' },
  precision: { type: 'string' },
  placement: { type: 'string' },
  devices: { type: 'string' },
  'what-if': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

/** The flag a request field comes from. */
function flagOf(field: string): string {
  const top = field.split('.')[0]!;
  const flags: Record<string, string> = {
    preset: '--preset',
    model: '--model',
    batch_size: '--batch-size',
    seq_len: '--seq-len',
    precision: '--precision',
    placement: '--placement',
    devices: '--devices',
    what_if: '--what-if',
  };
  const rest = field.slice(top.length + 1);
  return `${flags[top] ?? top}${rest && top !== 'placement' ? ` (${rest})` : ''}`;
}

const num = (flag: string, v: string) => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new CliError(`plan: ${flag} "${v}" is not a number`);
  return n;
};

/** "devices=8,memory_gb=80,tflops=67,link_gbps=100,latency_us=5" (or device_class=h100 for memory_gb and tflops) */
function parseWhatIf(spec: string): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const part of spec.split(',')) {
    const [k, v, ...more] = part.split('=').map((s) => s.trim());
    if (!k || v === undefined || more.length) throw new CliError(`plan: --what-if entry "${part}" is not KEY=VALUE; ${PLAN_USAGE}`);
    out[k] = k === 'device_class' ? v : num(`--what-if ${k}`, v);
  }
  return out;
}

/** The request the flags make (checked with runs.advise's schema; a wrong field names its flag). */
export function planRequestFromFlags(argv: string[]): { request: AdviseRequest; json: boolean } | null {
  let v: ReturnType<typeof parseArgs<{ options: typeof FLAGS; strict: true; allowPositionals: false; args: string[] }>>['values'];
  try {
    v = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }).values;
  } catch (e) {
    throw new CliError(`plan: ${(e as Error).message}; ${PLAN_USAGE}`);
  }
  if (v.help) return null;
  if (v['batch-size'] === undefined)
    throw new CliError(`plan: --batch-size is required (the global batch, sequences per step); ${PLAN_USAGE}`);
  if (v['seq-len'] === undefined) throw new CliError(`plan: --seq-len is required (tokens per sequence); ${PLAN_USAGE}`);
  let model: unknown;
  if (v.model !== undefined) {
    try {
      model = JSON.parse(v.model);
    } catch {
      throw new CliError(`plan: --model is not JSON; give {"n_layer":L,"n_head":H,"d_model":C,"block_size":T[,"vocab_size":V]}`);
    }
  }
  let placement: AdviseRequest['placement'];
  if (v.placement !== undefined) {
    try {
      const entries = parsePlacement(v.placement, v.placement.split(',').length);
      placement = entries.map((e) => ({ machine: e.where, ...(e.adapter !== undefined ? { device: e.adapter } : {}) }));
    } catch (e) {
      if (e instanceof PlacementError) throw new CliError(`plan: ${e.message}`);
      throw e;
    }
  }
  const raw = {
    ...(v.preset !== undefined ? { preset: v.preset } : {}),
    ...(model !== undefined ? { model } : {}),
    batch_size: num('--batch-size', v['batch-size']),
    seq_len: num('--seq-len', v['seq-len']),
    ...(v.precision !== undefined ? { precision: v.precision } : {}),
    ...(v.devices !== undefined ? { devices: num('--devices', v.devices) } : {}),
    ...(placement ? { placement } : {}),
    ...(v['what-if'] !== undefined ? { what_if: parseWhatIf(v['what-if']) } : {}),
  };
  const parsed = AdviseRequestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map(String).join('.');
    throw new CliError(`plan: ${flagOf(field)}: ${issue.message}`);
  }
  return { request: parsed.data, json: v.json === true };
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const ms = (x: number) => (x >= 100 ? Math.round(x).toString() : x.toPrecision(3));

/** The ranked layouts as a table: time split, tokens/s, the largest rank's peak, and the reason. */
export function formatAdvice(r: AdviseResult): string {
  const m = r.model;
  const lines = [
    `model: n_layer ${m.n_layer}, n_head ${m.n_head}, d_model ${m.d_model}, block_size ${m.block_size}, vocab ${m.vocab_size} (Ψ = ${m.params}); speeds: ${r.profile.source}${r.profile.measured_at ? ` (${r.profile.measured_at})` : ''}`,
  ];
  // bubble: each rank's idle time in its schedule (what a run measures); dev idle: the device's, which stages sharing it fill
  const head = ['#', 'layout', 'fits', 'step ms', 'compute', 'comm', 'bubble', 'dev idle', 'host', 'tokens/s', 'peak/rank', 'why'];
  const rows = r.layouts.map((l) => [
    String(l.rank_order + 1),
    layoutName(l.layout),
    l.fits ? 'yes' : 'NO',
    ms(l.time.step_ms),
    ms(l.time.compute_ms),
    ms(l.time.comm_exposed_ms),
    l.time.rank_idle_ms !== undefined ? ms(l.time.rank_idle_ms) : '—',
    l.time.rank_idle_ms !== undefined ? ms(l.time.bubble_ms) : '—',
    ms(l.time.host_copy_ms),
    String(Math.round(l.tokens_per_s)),
    formatBytes(Math.max(...l.ranks.map((k) => k.memory.total))),
    l.reason,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (i === head.length - 1 ? 0 : row[i]!.length))));
  for (const row of [head, ...rows]) lines.push(row.map((c, i) => (i === row.length - 1 ? c : pad(c, widths[i]!))).join('  '));
  for (const n of r.notes) lines.push(`note: ${n}`);
  return lines.join('\n') + '\n';
}

export async function planCommand(argv: string[], deps?: AdviseDeps): Promise<number> {
  const req = planRequestFromFlags(argv);
  if (!req) {
    process.stdout.write(
      `${PLAN_USAGE}\n  ranks every layout of these devices for the model and batch: predicted memory per rank and step time\n`,
    );
    return 0;
  }
  const d: AdviseDeps = deps ?? {
    devices: async () => DevicesViewSchema.parse({ ...(await collectDevices()), probed_at: new Date().toISOString() }),
    profile: () => Promise.resolve(loadMachineProfile()),
  };
  let result: AdviseResult;
  try {
    result = await adviseRequest(req.request, d);
  } catch (e) {
    if (e instanceof AdviceError) throw new CliError(`plan: ${flagOf(e.field)}: ${e.message}`);
    throw e;
  }
  process.stdout.write(req.json ? JSON.stringify(result) + '\n' : formatAdvice(result));
  return 0;
}
