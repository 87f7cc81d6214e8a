// runs.advise and `shardwise plan`: an AdviseRequest checked field by field, its model resolved
// (a preset or sizes), the devices each rank would run on (this machine's adapters, a placement,
// or a what-if machine) with their speeds (the stored machine profile, or the defaults when none
// was measured), then the cost model's ranking (common/advisor/plan.ts). Refusals are
// AdviceErrors naming the request field; the API turns them into ValidationErrors, the CLI into
// one line on stderr.
import type { DevicesView } from '../../common/api/index.js';
import { advise, checkPlanInput, nothingFits, type PlanDevice, type PlanHardware, planLayout } from '../../common/advisor/plan.js';
import { DEFAULT_DEVICE_SPEED, DEFAULT_LINK, type DeviceSpeed, type LinkSpeed, speedOfPeak } from '../../common/advisor/time.js';
import type { AdviseRequest, AdviseResult, Layout, LayoutPlan } from '../../common/advisor/types.js';
import { DEVICE_CLASS_IDS, deviceClassById } from '../../common/advisor/device-classes.js';
import type { MachineProfile } from '../../common/advisor/profile.js';
import { ASSUMED_VOCAB } from '../../common/model-params.js';
import { PRESETS } from '../../workers/protocol/presets.js';

export interface AdviseDeps {
  devices: () => Promise<DevicesView>;
  /** the stored profile of this machine, or null where none was measured */
  profile: () => Promise<MachineProfile | null>;
  /** while this machine is being profiled in the background (or that failed): what to tell the user */
  profilingNote?: () => string | null;
}

export class AdviceError extends Error {
  override name = 'AdviceError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const GiB = 2 ** 30;

function modelOf(r: AdviseRequest) {
  if (r.preset !== undefined && !(r.preset in PRESETS))
    throw new AdviceError('preset', `unknown preset "${r.preset}"; the presets are ${Object.keys(PRESETS).join(', ')}`);
  if (r.preset === undefined && r.model === undefined)
    throw new AdviceError('preset', 'name a model: a preset (tiny, small) or its sizes (model)');
  const p = r.preset !== undefined ? PRESETS[r.preset]! : undefined;
  const m = { ...(p ? { n_layer: p.n_layer, n_head: p.n_head, d_model: p.d_model, block_size: p.block_size } : {}), ...r.model };
  for (const k of ['n_layer', 'n_head', 'd_model', 'block_size'] as const)
    if (m[k] === undefined) throw new AdviceError(`model.${k}`, `model.${k} is missing: give every size of the model, or a preset`);
  return {
    n_layer: m.n_layer!,
    n_head: m.n_head!,
    d_model: m.d_model!,
    block_size: m.block_size!,
    vocab_size: r.model?.vocab_size ?? ASSUMED_VOCAB,
  };
}

/** The devices and speeds of this machine (and paired agents named by the placement). */
async function localHardware(r: AdviseRequest, deps: AdviseDeps): Promise<PlanHardware> {
  const view = await deps.devices();
  const profile = await deps.profile();
  const notes: string[] = [];
  if (view.adapters.length === 0)
    throw new AdviceError(
      'devices',
      'this machine has no WebGPU adapter to plan for (shardwise devices lists none); plan a what-if machine instead',
    );
  if (!profile) {
    notes.push(
      "no machine profile is stored: kernel and link speeds are the defaults (SwiftShader-like), not this machine's, so predicted times can be far off; run `shardwise profile` for a plan calibrated to this machine",
    );
    const profiling = deps.profilingNote?.();
    if (profiling) notes.push(profiling);
  }
  const speedOf = (index: number): { speed: DeviceSpeed; memory?: number } => {
    const a = profile?.adapters.find((x) => x.index === index);
    const sys = view.adapters.find((x) => x.index === index);
    const vram = sys?.systemGpu !== null && sys?.systemGpu !== undefined ? view.system.controllers[sys.systemGpu]?.vramMiB : null;
    const memory = a?.memory_bytes ?? (vram ? vram * 2 ** 20 : undefined);
    if (!a) return { speed: DEFAULT_DEVICE_SPEED, memory };
    return {
      speed: {
        kernels: a.kernels,
        h2d_gbps: a.h2d_gbps,
        d2h_gbps: a.d2h_gbps,
        ...(a.peak_tflops ? { peak_tflops: a.peak_tflops } : {}),
        ...(a.launch_ms !== undefined ? { launch_ms: a.launch_ms } : {}),
        ...(a.sync_ms !== undefined ? { sync_ms: a.sync_ms } : {}),
        ...(a.shared?.length ? { shared: a.shared } : {}),
        ...(a.is_software ? { is_software: true } : {}),
      },
      memory,
    };
  };
  const devices = new Map<string, PlanDevice>();
  const deviceAt = (machine: string, index: number, label: string): PlanDevice => {
    const key = `${machine}#${index}`;
    let d = devices.get(key);
    if (!d) {
      const s = speedOf(index);
      d = { label, machine, speed: s.speed, ...(s.memory !== undefined ? { memory_bytes: s.memory } : {}) };
      devices.set(key, d);
    }
    return d;
  };
  const adapterIndex = (dev: string | undefined, field: string): number => {
    if (dev === undefined) return view.adapters[0]!.index;
    const byIndex = /^\d+$/.test(dev) ? view.adapters.find((a) => a.index === Number(dev)) : undefined;
    const found = byIndex ?? view.adapters.find((a) => a.description.toLowerCase().includes(dev.toLowerCase()));
    if (!found)
      throw new AdviceError(
        field,
        `unknown device "${dev}": this machine's adapters are ${view.adapters.map((a) => `${a.index} (${a.description})`).join(', ')}`,
      );
    return found.index;
  };
  // a software adapter (SwiftShader) is no GPU: its label says what it is
  const localLabel = (i: number) => (view.adapters.find((a) => a.index === i)?.isSoftware ? `software adapter ${i}` : `GPU ${i}`);
  const local = profile?.links.find((l) => l.kind === 'shm') ?? profile?.links.find((l) => l.kind === 'tcp');
  let ranks: PlanDevice[];
  let remote: LinkSpeed | undefined;
  const noted = new Set<string>();
  if (r.placement) {
    ranks = r.placement.map((e, rank) => {
      if (e.machine === 'local') {
        const i = adapterIndex(e.device, `placement.${rank}.device`);
        return deviceAt('local', i, localLabel(i));
      }
      // a paired agent's device: its speeds are taken as this machine's (the agent's own profile is not read here)
      const i = e.device !== undefined && /^\d+$/.test(e.device) ? Number(e.device) : 0;
      const link = profile?.links.find((l) => l.kind === 'agent' && l.peer === e.machine);
      if (!noted.has(e.machine)) {
        noted.add(e.machine);
        notes.push(
          link
            ? `the link to ${e.machine}: ${link.gbps.toFixed(3)} GB/s, ${link.latency_us.toFixed(0)} µs, measured by 'shardwise profile' at ${profile!.machine.measured_at}`
            : `no link to ${e.machine} was measured: the default link speed is assumed`,
        );
      }
      remote = link ?? DEFAULT_LINK;
      return deviceAt(e.machine, i, `${e.machine} GPU ${i}`);
    });
    if (r.placement.some((e) => e.machine !== 'local'))
      notes.push("a paired agent's devices are taken to run at this machine's measured speeds");
  } else {
    const n = r.devices ?? Math.max(2, view.adapters.length);
    ranks = Array.from({ length: n }, (_, rank) => {
      const a = view.adapters[rank % view.adapters.length]!;
      return deviceAt('local', a.index, localLabel(a.index));
    });
    if (n > view.adapters.length)
      notes.push(`${n} ranks on ${view.adapters.length} adapter(s): ranks on one adapter share its memory and throughput`);
  }
  return {
    source: profile ? 'measured' : 'defaults',
    ...(profile ? { measured_at: profile.machine.measured_at } : {}),
    ranks,
    local: local ?? DEFAULT_LINK,
    ...(remote ? { remote } : {}),
    notes,
  };
}

function whatIfHardware(w: NonNullable<AdviseRequest['what_if']>): PlanHardware {
  let memory: number;
  let tflops: number;
  let name: string;
  if ('device_class' in w) {
    const c = deviceClassById(w.device_class);
    if (!c)
      throw new AdviceError(
        'what_if.device_class',
        `unknown device class "${w.device_class}"; the known classes are ${DEVICE_CLASS_IDS.join(', ')} (or give memory_gb and tflops)`,
      );
    memory = c.memory_bytes;
    tflops = c.fp32_tflops;
    name = c.id;
  } else {
    memory = w.memory_gb * GiB;
    tflops = w.tflops;
    name = 'what-if';
  }
  const speed = speedOfPeak(tflops);
  const ranks = Array.from({ length: w.devices }, (_, i): PlanDevice => ({
    label: `${name} GPU ${i}`,
    machine: `what-if ${i}`,
    memory_bytes: memory,
    speed,
  }));
  const link = { gbps: w.link_gbps, latency_us: w.latency_us };
  return {
    source: 'what-if',
    ranks,
    local: link,
    remote: link,
    notes: [
      `what-if: ${w.devices} x ${name} (${memory / GiB} GiB, ${tflops} TFLOP/s fp32), links ${w.link_gbps} GB/s and ${w.latency_us} µs; matmuls assumed at half the peak, memory-bound kernels at 20 GB/s per peak TFLOP/s, 25 GB/s host copies`,
    ],
  };
}

/** The request's model, hardware and the plan's other inputs; AdviceError where a field is wrong. */
async function planInput(r: AdviseRequest, deps: AdviseDeps) {
  if (r.what_if && (r.placement || r.devices !== undefined))
    throw new AdviceError('what_if', 'what_if plans its own devices: leave out devices and placement');
  if (r.placement && r.devices !== undefined && r.devices !== r.placement.length)
    throw new AdviceError('devices', `devices ${r.devices} differs from the placement's ${r.placement.length} ranks; give one of them`);
  const model = modelOf(r);
  const hardware = r.what_if ? whatIfHardware(r.what_if) : await localHardware(r, deps);
  const input = {
    model,
    ...(r.preset ? { preset: r.preset } : {}),
    batch_size: r.batch_size,
    seq_len: r.seq_len,
    precision: r.precision ?? 'fp32',
    ...(r.placement ? { placement: r.placement } : {}),
  };
  const errors = checkPlanInput({ ...input, ranks: hardware.ranks.length });
  if (errors.length) throw new AdviceError(errors[0]!.field, errors[0]!.message);
  return { ...input, hardware };
}

/** The ranked plan of a checked request; AdviceError where a field is wrong or nothing fits. */
export async function adviseRequest(r: AdviseRequest, deps: AdviseDeps): Promise<AdviseResult> {
  const result = advise(await planInput(r, deps));
  const none = nothingFits(result);
  if (none) throw new AdviceError(r.preset !== undefined ? 'preset' : none.field, none.message);
  return result;
}

/** The plan of one layout (a launched run's), with where its speeds came from: what a run's prediction.json keeps. */
export async function adviseLayout(
  r: AdviseRequest,
  layout: Layout,
  deps: AdviseDeps,
): Promise<{ plan: LayoutPlan; profile: AdviseResult['profile']; notes: string[] }> {
  const input = await planInput(r, deps);
  const hw = input.hardware;
  if (hw.ranks.length < layout.world)
    throw new AdviceError(
      'devices',
      `the layout has ${layout.world} ranks, the request plans ${hw.ranks.length}; give devices ${layout.world}`,
    );
  return {
    plan: planLayout(input, layout),
    profile: { source: hw.source, ...(hw.measured_at ? { measured_at: hw.measured_at } : {}) },
    notes: hw.notes,
  };
}
