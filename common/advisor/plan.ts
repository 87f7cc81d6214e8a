// The advisor: every layout the ranks allow (layouts.ts), each rank's predicted memory
// (memory.ts) against its device, the predicted step time (time.ts), ranked: layouts that fit
// first, fastest first; those that do not fit after, the nearest to fitting first. Each says why
// in the seeds' terms ("optimizer 8Ψ = 3.1 GB per rank > 2 GB on GPU 1: use ZeRO-1/2/3 or
// offload"). The caller (the controller, the CLI) resolves the model, the devices each rank runs
// on and their speeds (a stored machine profile, the defaults, or a what-if machine); this file
// only computes. Pure.
import type { LaunchConfig } from '../api/launch-config.js';
import { MEMORY_CATEGORIES, type MemoryCategory } from '../memory-categories.js';
import { type GptConfig, rankTensors } from '../model-layout.js';
import { gptParamCount } from '../model-params.js';
import { strategyOf, TABLE } from '../strategies.js';
import { DATA_PARALLEL_FAMILY, enumerateLayouts, familiesMissingAt, layoutName } from './layouts.js';
import { predictMemory } from './memory.js';
import { STEP_SHARE_OP } from './profile.js';
import { aloneStepSamples, type DeviceSpeed, type LinkSpeed, predictStepTime, timesPrecision } from './time.js';
import type { AdviseResult, Layout, LayoutPlan, Precision, RankPlan } from './types.js';
import { formatBytes as binaryBytes } from '../charts/style.js';

/** A device a rank runs on. Ranks given the same object share it (its memory and its throughput). */
export interface PlanDevice {
  /** how the plan names it: "GPU 0", "agent-b GPU 1", "what-if GPU 3" */
  label: string;
  /** the machine it is in (ranks on one machine talk over its local link) */
  machine: string;
  memory_bytes?: number;
  speed: DeviceSpeed;
}

export interface PlanHardware {
  source: 'measured' | 'defaults' | 'what-if';
  measured_at?: string;
  /** the device of each rank, rank order: a layout of w ranks uses the first w */
  ranks: PlanDevice[];
  /** between ranks of one machine */
  local: LinkSpeed;
  /** between machines (paired agents, a what-if cluster's network) */
  remote?: LinkSpeed;
  /** this machine's link to each other machine by its name in PlanDevice.machine (a paired agent's, measured by shardwise profile); where absent, remote */
  machine_links?: Record<string, LinkSpeed>;
  /** where the speeds came from, what was assumed */
  notes: string[];
}

export interface PlanInput {
  model: GptConfig;
  /** the preset the model came from (the launch form is filled with it) */
  preset?: string;
  batch_size: number;
  seq_len: number;
  precision: Precision;
  hardware: PlanHardware;
  /** the request's placement: every layout's launch carries its first `world` entries */
  placement?: LaunchConfig['placement'];
}

/** A request the advisor refuses, about one field. */
export interface PlanFieldError {
  field: string;
  message: string;
}

export const GB = 1e9;
/** "3.1 GiB", "812 MiB", "64.0 KiB": binary units, as the dashboard's charts and tables write bytes (one convention everywhere) */
export function formatBytes(b: number): string {
  return binaryBytes(b);
}

/** What to do about the largest category of a layout that does not fit (the seeds' advice), leaving out what the layout already does. */
export function remedy(cat: MemoryCategory, l: Layout): string {
  const { zeroStage, splitsModel: splits } = TABLE[l.strategy];
  switch (cat) {
    case 'optimizer':
      if (zeroStage === 3) return 'shard over more ranks, or add tensor or pipeline parallelism';
      if (zeroStage > 0) return l.offload_optimizer ? 'shard over more ranks' : 'use offload, or shard over more ranks';
      return splits ? 'add data-parallel ranks with ZeRO-1 (3d), or more tensor-parallel ranks or stages' : 'use ZeRO-1/2/3 or offload';
    case 'grads':
      if (zeroStage >= 2) return 'shard over more ranks';
      return splits ? 'use more tensor-parallel ranks or stages' : 'use ZeRO-2 or ZeRO-3';
    case 'params':
      if (zeroStage === 3) return "use tensor or pipeline parallelism (ZeRO-3 still gathers two whole layers' weights)";
      return splits ? 'use more tensor-parallel ranks or stages' : 'use ZeRO-3, tensor or pipeline parallelism';
    case 'activations':
      return `use ${l.activation_checkpointing ? '' : 'activation checkpointing, '}more micro-batches, a pipeline or tensor parallelism`;
    case 'comm':
      return 'lower bucket_cap_mb';
    case 'workspace':
      return 'use more micro-batches or tensor parallelism';
  }
}

/** "8Ψ", "4Ψ/2", "0.51Ψ": a model-state category in multiples of Ψ; other categories in bytes only. */
function psiTerm(cat: MemoryCategory, bytes: number, psi: number): string {
  if (cat !== 'params' && cat !== 'grads' && cat !== 'optimizer') return '';
  const k = bytes / psi;
  const r = k >= 10 ? Math.round(k) : Math.round(k * 100) / 100;
  return ` ${r}Ψ =`;
}

/** Problems with the request that no layout gets past, field by field. */
export function checkPlanInput(i: Omit<PlanInput, 'hardware'> & { ranks: number }): PlanFieldError[] {
  const out: PlanFieldError[] = [];
  const m = i.model;
  if (i.seq_len > m.block_size)
    out.push({
      field: 'seq_len',
      message: `seq_len ${i.seq_len} is longer than the model's block_size ${m.block_size}; pick seq_len <= ${m.block_size}`,
    });
  if (m.d_model % m.n_head !== 0)
    out.push({
      field: 'model.n_head',
      message: `d_model ${m.d_model} is not divisible by n_head ${m.n_head}: each head needs d_model / n_head columns`,
    });
  if (out.length) return out;
  // a batch that only a smaller world splits is planned on that world (advise's notes say why the
  // rest is not listed); refused only where no layout of two ranks or more takes it at all
  const W = i.ranks;
  if (W > 1 && !enumerateLayouts(m, i.batch_size, W).some((l) => l.world > 1)) {
    const others = familiesMissingAt(m, i.batch_size, Math.min(W, 2)).filter((f) => f.family !== DATA_PARALLEL_FAMILY);
    const why = others.length ? `, and no other layout of 2 ranks applies (${others.map((f) => `${f.family}: ${f.why}`).join('; ')})` : '';
    out.push({
      field: 'batch_size',
      message: `batch_size ${i.batch_size} does not split over ${W === 2 ? '2' : `2 to ${W}`} ranks (data parallelism gives each rank whole rows)${why}; pick a multiple of ${W}, or fewer devices`,
    });
  }
  return out;
}

interface Scored {
  plan: Omit<LayoutPlan, 'rank_order' | 'reason'>;
  /** the worst device overshoot (bytes over its memory; <= 0 fits) and where */
  over: { bytes: number; device: string; deviceBytes: number; rank: number; category: MemoryCategory; categoryBytes: number } | null;
}

function launchOf(i: PlanInput, l: Layout): LaunchConfig {
  const s = strategyOf(l.strategy)!;
  const { n_layer, n_head, d_model, block_size } = i.model;
  return {
    ...(i.preset ? { preset: i.preset } : {}),
    model: { n_layer, n_head, d_model, block_size },
    strategy: l.strategy,
    world: l.world,
    ...(s.knobs.has('tp') ? { tp: l.tp ?? l.world } : {}),
    ...(s.knobs.has('pp') ? { pp: l.pp ?? l.world } : {}),
    ...(s.knobs.has('dp') && l.dp !== undefined ? { dp: l.dp } : {}),
    ...(l.schedule ? { schedule: l.schedule } : {}),
    ...(s.knobs.has('offload_optimizer') ? { offload_optimizer: l.offload_optimizer ? 'cpu' : 'none' } : {}),
    micro_batches: l.micro_batches,
    batch_size: i.batch_size,
    seq_len: i.seq_len,
    activation_checkpointing: l.activation_checkpointing === true,
    ...(i.precision !== 'fp32' ? { precision: i.precision } : {}),
    ...(i.placement ? { placement: i.placement.slice(0, l.world) } : {}),
  };
}

function score(i: PlanInput, l: Layout, psi: number): Scored {
  const { model, batch_size, seq_len, hardware: hw } = i;
  const q = { model, batch_size, seq_len, layout: { ...l, precision: i.precision } };
  const mem = predictMemory(q);
  const devices = hw.ranks.slice(0, l.world);
  const ranks: RankPlan[] = mem.map((p, rank) => ({
    rank,
    device: devices[rank]!.label,
    ...(devices[rank]!.memory_bytes !== undefined ? { device_memory_bytes: devices[rank]!.memory_bytes } : {}),
    memory: p.device,
    host_memory_bytes: p.host,
  }));
  // ranks sharing a device share its memory
  let over: Scored['over'] = null;
  for (const d of new Set(devices)) {
    if (d.memory_bytes === undefined) continue;
    const mine = ranks.filter((_, r) => devices[r] === d);
    const used = mine.reduce((s, r) => s + r.memory.total, 0);
    if (over && used - d.memory_bytes <= over.bytes) continue;
    const worst = mine.reduce((a, b) => (a.memory.total >= b.memory.total ? a : b));
    const category = MEMORY_CATEGORIES.reduce((a, c) => (worst.memory[c] > worst.memory[a] ? c : a));
    over = {
      bytes: used - d.memory_bytes,
      device: d.label,
      deviceBytes: d.memory_bytes,
      rank: worst.rank,
      category,
      categoryBytes: worst.memory[category],
    };
  }
  const s = strategyOf(l.strategy)!;
  const g = s.grid({ world: l.world, tp: l.tp, pp: l.pp, dp: l.dp });
  const rankParams = Array.from({ length: l.world }, (_, r) => rankTensors(model, g, r).reduce((a, t) => a + t.numel, 0));
  const machines = new Set(devices.map((d) => d.machine));
  // across machines the collectives run at the pace of the slowest link they cross
  const remotes = [...machines].flatMap((m) => hw.machine_links?.[m] ?? (m !== devices[0]!.machine && hw.remote ? [hw.remote] : []));
  const link = machines.size > 1 && remotes.length ? remotes.reduce((a, b) => (b.gbps < a.gbps ? b : a)) : hw.local;
  // the time model tells devices apart by identity: one speed object per device (what-if devices share one speed)
  const speedOf = new Map(devices.map((d) => [d, { ...d.speed }]));
  const t = predictStepTime({ ...q, devices: devices.map((d) => speedOf.get(d)!), link, params: psi, rankParams });
  const peaks = devices.map((d) => d.speed.peak_tflops);
  const mfu = peaks.every((p) => p !== undefined)
    ? t.model_flops / (t.step_ms / 1000) / (peaks.reduce((a, p) => a + p!, 0) * 1e12)
    : undefined;
  return {
    plan: {
      layout: { ...l, ...(i.precision !== 'fp32' ? { precision: i.precision } : {}) },
      launch: launchOf(i, l),
      fits: over === null || over.bytes <= 0,
      ranks,
      time: {
        step_ms: t.step_ms,
        compute_ms: t.compute_ms,
        comm_exposed_ms: t.comm_exposed_ms,
        bubble_ms: t.bubble_ms,
        host_copy_ms: t.host_copy_ms,
        ...(t.rank_idle_ms !== undefined ? { rank_idle_ms: t.rank_idle_ms } : {}),
      },
      tokens_per_s: t.tokens_per_s,
      ...(mfu !== undefined ? { mfu } : {}),
    },
    over,
  };
}

const ms = (x: number) => (x >= 100 ? `${Math.round(x)} ms` : `${x.toPrecision(2)} ms`);

/** The biggest part of a step besides compute, for the reason text. */
function timeParts(p: Scored['plan']): string {
  const t = p.time;
  const parts: [string, number][] = [
    ['compute', t.compute_ms],
    ['exposed communication', t.comm_exposed_ms],
    ['pipeline bubble', t.bubble_ms],
    ['host copies', t.host_copy_ms],
  ];
  return parts
    .filter(([, v]) => v > 0.005 * t.step_ms)
    .map(([n, v]) => `${n} ${ms(v)}`)
    .join(' + ');
}

function reasonOf(s: Scored, best: Scored | null, psi: number): string {
  const p = s.plan;
  if (!p.fits) {
    const o = s.over!;
    const per = p.ranks.length > 1 ? ' per rank' : '';
    const need = p.ranks.filter((k) => k.device === o.device).reduce((a, k) => a + k.memory.total, 0);
    const who = p.ranks.filter((k) => k.device === o.device).length > 1 ? `the ranks on ${o.device} need` : `rank ${o.rank} needs`;
    return `${o.category}${psiTerm(o.category, o.categoryBytes, psi)} ${formatBytes(o.categoryBytes)}${per} is the largest part of the ${formatBytes(
      need,
    )} ${who} > ${formatBytes(o.deviceBytes)} on ${o.device}: ${remedy(o.category, p.layout)}`;
  }
  const step = `${ms(p.time.step_ms)} per step (${timeParts(p)}), ${Math.round(p.tokens_per_s)} tokens/s`;
  if (!best || best === s) return `fastest layout that fits: ${step}`;
  const x = p.time.step_ms / best.plan.time.step_ms;
  return `fits; ${x.toFixed(2)}x the step time of ${layoutName(best.plan.layout)}: ${step}`;
}

/** Rank every layout the request's ranks allow. Throws nothing: check the input with checkPlanInput first. */
export function advise(i: PlanInput): AdviseResult {
  const { model } = i;
  const psi = gptParamCount(model, model.vocab_size);
  const layouts = enumerateLayouts(model, i.batch_size, i.hardware.ranks.length);
  const scored = layouts.map((l) => score(i, l, psi));
  const fit = scored.filter((s) => s.plan.fits).sort((a, b) => a.plan.time.step_ms - b.plan.time.step_ms);
  const unfit = scored.filter((s) => !s.plan.fits).sort((a, b) => a.over!.bytes - b.over!.bytes);
  const best = fit[0] ?? null;
  const ranked = [...fit, ...unfit].map((s, rank_order) => ({ ...s.plan, reason: reasonOf(s, best, psi), rank_order }));
  const notes = [...i.hardware.notes];
  const W = i.hardware.ranks.length;
  const missing = familiesMissingAt(model, i.batch_size, W);
  if (missing.length) {
    const worlds = [...new Set(layouts.map((l) => l.world))].sort((a, b) => a - b);
    const fewer = worlds.includes(W) ? '' : `; every layout listed uses fewer devices (${worlds.join(', ')} of the ${W})`;
    notes.push(`not listed at ${W} ranks: ${missing.map((f) => `${f.family} (${f.why})`).join('; ')}${fewer}`);
  }
  if (i.precision !== 'fp32') {
    const untimed = [...new Set(i.hardware.ranks.filter((d) => !timesPrecision(d.speed, i.precision)).map((d) => d.label))];
    if (untimed.length)
      notes.push(
        `the speeds of ${untimed.join(', ')} time no ${i.precision} matmul or attention kernels: ${i.precision} compute is taken at their fp32 speed (shardwise profile --refresh times the 16-bit kernels)`,
      );
    notes.push(
      `${i.precision} mixed precision: 16-bit weights, gradients and activations (2 bytes each, also on the wire), fp32 master weights and AdamW moments (12 bytes per parameter the optimizer updates)`,
    );
  }
  notes.push(...sharingNotes(i.hardware), ...microBatchNotes(i.hardware));
  if (i.hardware.ranks.some((d) => d.memory_bytes === undefined))
    notes.push('the memory of some devices is unknown (a software adapter reports none): their layouts are taken to fit');
  return {
    profile: { source: i.hardware.source, ...(i.hardware.measured_at ? { measured_at: i.hardware.measured_at } : {}) },
    model: {
      n_layer: model.n_layer,
      n_head: model.n_head,
      d_model: model.d_model,
      block_size: model.block_size,
      vocab_size: model.vocab_size,
      params: psi,
    },
    layouts: ranked,
    notes,
  };
}

/** How the time model treats each device that two ranks or more of the request share (time.ts shareSpeedup). */
function sharingNotes(hw: PlanHardware): string[] {
  const ranksOn = new Map<PlanDevice, number>();
  for (const d of hw.ranks) ranksOn.set(d, (ranksOn.get(d) ?? 0) + 1);
  const out: string[] = [];
  for (const [d, n] of ranksOn) {
    if (n < 2) continue;
    const shared = d.speed.shared ?? [];
    if (shared.length === 0) {
      out.push(
        `ranks that share ${d.label} split its throughput (its busy time is the sum of theirs): no speedup of processes sharing it was measured${hw.source === 'what-if' ? '' : " ('shardwise profile --refresh' measures one)"}`,
      );
      continue;
    }
    const range = (xs: number[]) => {
      const [lo, hi] = [Math.min(...xs).toFixed(2), Math.max(...xs).toFixed(2)];
      return lo === hi ? `x${lo}` : `x${lo} to x${hi}`;
    };
    const ksOf = (xs: typeof shared) => [...new Set(xs.map((x) => x.k))].sort((a, b) => a - b).join(', ');
    // whole steps where the profile timed them (time.ts stepShareSpeedup), else kernel by kernel
    const steps = shared.filter((x) => x.op === STEP_SHARE_OP);
    const kernels = shared.filter((x) => x.op !== STEP_SHARE_OP);
    out.push(
      steps.length
        ? `ranks that share ${d.label} get its throughput times the aggregate speedup 'shardwise profile' measured for ${ksOf(steps)} processes each running a whole training step on it (${range(steps.map((x) => x.speedup))} at the micro-batches it timed, by the size of each rank's launches; more ranks than that: the largest measured)`
        : `ranks that share ${d.label} get its throughput times the aggregate speedup 'shardwise profile' measured for ${ksOf(kernels)} processes on it at their kernels' sizes (${range(kernels.map((x) => x.speedup))} over the sizes it timed; more ranks than that: the largest measured)`,
    );
  }
  return out;
}

/** Where the profile timed a step alone at parts of a batch: the time model runs smaller micro-batches at that speed (time.ts microBatchScale). */
function microBatchNotes(hw: PlanHardware): string[] {
  const out: string[] = [];
  for (const d of new Set(hw.ranks)) {
    const steps = aloneStepSamples(d.speed);
    if (steps.length === 0) continue;
    const parts = steps
      .map((x) => `${x.shape ?? `B=${x.batch}`} ${(x.alone_ms! / x.whole_batch_ms!).toFixed(2)} of B=${x.whole_batch}'s`)
      .join(', ');
    out.push(
      `a rank's micro-batch smaller than the batch runs on ${d.label} as fast as 'shardwise profile' timed a step alone at that part of a batch, against the whole batch's step (${parts}), not in proportion to its kernels' sizes`,
    );
  }
  return out;
}

/** When nothing fits: the smallest missing resource (device memory on the nearest layout), as a refusal. */
export function nothingFits(r: AdviseResult): PlanFieldError | null {
  if (r.layouts.length === 0 || r.layouts.some((l) => l.fits)) return null;
  const nearest = r.layouts[0]!;
  // the nearest layout's shortfall: bytes over on its fullest device (ranks sharing a device add up)
  const used = new Map<string, { used: number; has: number }>();
  for (const k of nearest.ranks) {
    const u = used.get(k.device) ?? { used: 0, has: k.device_memory_bytes ?? Infinity };
    u.used += k.memory.total;
    used.set(k.device, u);
  }
  const short = Math.max(...[...used.values()].map((u) => u.used - u.has));
  return {
    field: 'model',
    message: `the model (Ψ = ${r.model.params}) fits no layout of these devices; the nearest, ${layoutName(nearest.layout)}, needs ${formatBytes(
      short,
    )} more device memory (${nearest.reason}); the smallest missing resource is ${formatBytes(short)} of memory per device, or more devices to shard over`,
  };
}

/** One layout's plan as advise would list it (a launched run's own layout, for its prediction.json); rank_order 0. */
export function planLayout(i: PlanInput, l: Layout): LayoutPlan {
  const psi = gptParamCount(i.model, i.model.vocab_size);
  const s = score(i, l, psi);
  return { ...s.plan, reason: reasonOf(s, null, psi), rank_order: 0 };
}
