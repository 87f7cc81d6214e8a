// `shardwise profile [--json] [--refresh] [--preset NAME[,NAME]] [--model JSON] [--batch-size B] [--quick]`:
// a short calibration of this machine (at most 30 s) for the advisor. The device work runs in a
// child (workers/cli/profile.js: each kernel of a training step per adapter, copy rates, the
// throughput of two processes sharing the adapter against one, on a rank's whole step and per
// kernel, links between two local ranks)
// under a deadline; this side measures the link to each paired agent
// (profile-agents.ts), adds what the system knows (device memory, the device class and its peak) and stores the profile in the controller's data dir.
// A stored profile that covers the sizes asked is printed again without measuring, until --refresh.
import { spawn } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { deviceClassForName } from '../../common/advisor/device-classes.js';
import { type MachineProfile, MachineProfileSchema, STEP_SHARE_OP } from '../../common/advisor/profile.js';
import type { GptConfig } from '../../common/model-layout.js';
import { ASSUMED_VOCAB } from '../../common/model-params.js';
import { PRESETS } from '../../workers/protocol/presets.js';
import type { ProfileShape } from '../../workers/protocol/profile-shape.js';
import { ControllerIdentity, defaultHome } from '../cluster/controller-identity.js';
import { collectDevices, type DevicesReport } from '../machine/devices.js';
import { CliError } from './errors.js';
import { profileAgentLinks } from './profile-agents.js';
import { sharedStepLine } from './profile-shared-line.js';
import { loadMachineProfile, profilePath, saveMachineProfile } from '../machine/profile-store.js';

const USAGE = 'usage: shardwise profile [--json] [--refresh] [--preset NAME[,NAME...]] [--model JSON] [--batch-size B] [--quick]';
const WORKER = fileURLToPath(new URL('../../workers/cli/profile.js', import.meta.url));
/** the whole calibration, devices probe included */
export const PROFILE_LIMIT_MS = 30_000;

const ModelSchema = z
  .object({
    n_layer: z.number().int().positive(),
    n_head: z.number().int().positive(),
    d_model: z.number().int().positive(),
    block_size: z.number().int().positive(),
    vocab_size: z.number().int().positive().optional(),
  })
  .strict() satisfies z.ZodType<Omit<GptConfig, 'vocab_size'> & Partial<Pick<GptConfig, 'vocab_size'>>>;

/** How much measuring: the default fits 30 s on SwiftShader; --quick (a few seconds) is for CI and a first look. */
const BUDGETS = {
  full: {
    kernel: { roundMs: 40, rounds: 3 },
    copy: { bytes: 16 << 20, rounds: 3 },
    share: { k: 2, roundMs: 20, windowMs: 150, minRounds: 2 },
    link: { pings: 50, bytes: 8 << 20, sends: 3 },
    agent: { pings: 30, bytes: 4 << 20 },
  },
  quick: {
    kernel: { roundMs: 4, rounds: 2 },
    copy: { bytes: 1 << 20, rounds: 2 },
    share: { k: 2, roundMs: 4, windowMs: 20, minRounds: 2 },
    link: { pings: 10, bytes: 1 << 20, sends: 2 },
    agent: { pings: 10, bytes: 1 << 20 },
  },
};

function shapesOf(values: { preset?: string; model?: string; 'batch-size'?: string }, quick: boolean): ProfileShape[] {
  const B = values['batch-size'] === undefined ? undefined : Number(values['batch-size']);
  if (B !== undefined && !(Number.isInteger(B) && B > 0))
    throw new CliError(`--batch-size must be a positive integer, got "${values['batch-size']}"`);
  if (values.model !== undefined) {
    let raw: unknown;
    try {
      raw = JSON.parse(values.model);
    } catch {
      throw new CliError(`--model must be JSON like '{"n_layer":4,"n_head":4,"d_model":128,"block_size":128}', got ${values.model}`);
    }
    const r = ModelSchema.safeParse(raw);
    if (!r.success) {
      const i = r.error.issues[0];
      throw new CliError(
        `--model: ${i?.path.join('.') || 'value'}: ${i?.message}; give n_layer, n_head, d_model, block_size (and vocab_size)`,
      );
    }
    const m = r.data;
    if (m.d_model % m.n_head !== 0) throw new CliError(`--model: d_model ${m.d_model} is not divisible by n_head ${m.n_head}`);
    const V = m.vocab_size ?? ASSUMED_VOCAB;
    return [
      {
        name: `L${m.n_layer} H${m.n_head} C${m.d_model} T${m.block_size} V${V}`,
        B: B ?? 8,
        T: m.block_size,
        C: m.d_model,
        NH: m.n_head,
        V,
        L: m.n_layer,
      },
    ];
  }
  const names = (values.preset ?? (quick ? 'tiny' : 'tiny,small')).split(',').filter(Boolean);
  return names.map((name) => {
    const p = PRESETS[name];
    if (!p) throw new CliError(`--preset: unknown preset "${name}"; choose from ${Object.keys(PRESETS).join(', ')}, or give --model JSON`);
    return { name, B: B ?? p.batch_size, T: p.block_size, C: p.d_model, NH: p.n_head, V: ASSUMED_VOCAB, L: p.n_layer };
  });
}

/** Runs the device side under the deadline; its stdout is one JSON object. */
function runWorker(request: object, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER, JSON.stringify(request)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (err += String(d)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new CliError(
          `the calibration took longer than ${Math.round(timeoutMs / 1000)} s and was stopped ---> HINT: profile fewer sizes (--preset tiny) or use --quick`,
          1,
        ),
      );
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new CliError(`could not start the profile worker: ${e.message}`, 1));
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new CliError(`the profile worker failed: ${err.trim().split('\n').at(-1) || `exit code ${code}`}`, 1));
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new CliError(`the profile worker printed no JSON answer (${out.slice(0, 80)})`, 1));
      }
    });
  });
}

/** Device memory and peak per adapter: a system GPU's VRAM, else the device class's; SwiftShader's memory is the host's. */
function withMemoryAndPeak(adapters: MachineProfile['adapters'], devices: DevicesReport | null): MachineProfile['adapters'] {
  return adapters.map((a) => {
    const entry = devices?.adapters.find((d) => d.index === a.index);
    const sys = entry && entry.systemGpu !== null ? devices!.system.controllers[entry.systemGpu] : undefined;
    const cls = deviceClassForName(a.name) ?? (sys ? deviceClassForName(sys.model) : undefined);
    const vram = sys?.memoryTotalMiB ?? sys?.vramMiB ?? null;
    const memory_bytes = vram !== null ? vram * 2 ** 20 : cls ? cls.memory_bytes : a.is_software ? os.totalmem() : undefined;
    return {
      ...a,
      ...(memory_bytes !== undefined ? { memory_bytes } : {}),
      ...(cls ? { device_class: cls.id, peak_tflops: cls.fp32_tflops, peak_tflops_half: cls.half_tflops } : {}),
    };
  });
}

/** the part of the 30 s kept for the links to paired agents, after the device work */
const agentReserveMs = (agents: number) => (agents === 0 ? 0 : Math.min(8_000, 1_000 + 2_500 * agents));

/** Measure this machine now. */
export async function measureProfile(shapes: ProfileShape[], quick: boolean, home: string): Promise<MachineProfile> {
  const t0 = performance.now();
  const identity = new ControllerIdentity(home);
  const devices = await collectDevices().catch(() => null);
  const left = PROFILE_LIMIT_MS - (performance.now() - t0) - agentReserveMs(identity.state.agents.length);
  const budget = quick ? BUDGETS.quick : BUDGETS.full;
  // the kernels get 45% of what is left, the sharing test until 85% (its whole steps at 3 sizes need ~10 s on small here); the local links and the answer the rest (~1-2 s)
  const { agent: agentPlan, ...workerBudget } = budget;
  const worker = (await runWorker({ shapes, ...workerBudget, kernel_ms: 0.45 * left, share_ms: 0.85 * left }, Math.max(5_000, left))) as {
    adapters: MachineProfile['adapters'];
    links: MachineProfile['links'];
    skipped: string[];
  };
  const remote = await profileAgentLinks(identity, agentPlan, t0 + PROFILE_LIMIT_MS - 500);
  const profile: MachineProfile = {
    machine: { hostname: os.hostname(), id: identity.state.controllerId, measured_at: new Date().toISOString() },
    adapters: withMemoryAndPeak(worker.adapters ?? [], devices),
    links: [...(worker.links ?? []), ...remote.links],
    ...(remote.errors.length ? { link_errors: remote.errors } : {}),
    sizes: shapes.map((s) => s.name),
    duration_ms: Math.round(performance.now() - t0),
  };
  const r = MachineProfileSchema.safeParse(profile);
  if (!r.success)
    throw new CliError(
      `the profile worker's answer is not a profile: ${r.error.issues[0]?.path.join('.')}: ${r.error.issues[0]?.message}`,
      1,
    );
  return r.data;
}

function formatProfile(p: MachineProfile, stored: boolean, file: string): string {
  const out: string[] = [];
  out.push(
    `${p.machine.hostname}: profiled ${p.machine.measured_at}${p.duration_ms !== undefined ? ` in ${(p.duration_ms / 1000).toFixed(1)} s` : ''}`,
  );
  out.push(stored ? `  (the stored profile ${file}; --refresh measures again)` : `  stored in ${file}`);
  for (const a of p.adapters) {
    const mem = a.memory_bytes ? `${(a.memory_bytes / 2 ** 30).toFixed(1)} GiB` : 'memory ?';
    const peak = a.peak_tflops ? ` · peak ${a.peak_tflops} TFLOP/s fp32 (${a.device_class})` : '';
    out.push(
      `  [${a.index}] ${a.name} (${a.backend}) · ${mem}${peak} · H2D ${a.h2d_gbps.toFixed(2)} GB/s · D2H ${a.d2h_gbps.toFixed(2)} GB/s`,
    );
    if (a.launch_ms !== undefined && a.sync_ms !== undefined)
      out.push(`      a launch costs ${a.launch_ms.toFixed(3)} ms, a host round trip ${a.sync_ms.toFixed(3)} ms beyond it`);
    for (const k of a.kernels) {
      const gflops = k.flops / (k.ms * 1e6);
      const gbps = k.bytes / (k.ms * 1e6);
      out.push(
        `      ${k.op.padEnd(12)} ${k.shape.padEnd(44)} ${k.ms.toFixed(3).padStart(9)} ms  ${gflops.toFixed(2).padStart(8)} GFLOP/s  ${gbps.toFixed(2).padStart(7)} GB/s`,
      );
    }
    const steps = (a.shared ?? []).filter((x) => x.op === STEP_SHARE_OP);
    const kernels = (a.shared ?? []).filter((x) => x.op !== STEP_SHARE_OP);
    if (steps.length) {
      out.push(`    shared, whole steps: k processes each running a rank's training step on it at once (what ranks sharing it get)`);
      for (const x of steps) out.push(`      ${sharedStepLine(x)}`);
    }
    if (kernels.length) {
      out.push(
        `    shared, kernels: k processes running one kernel on it at once, their throughput together over one alone${steps.length ? '' : ' (what ranks sharing it get)'}`,
      );
      for (const x of kernels) out.push(`      ${x.op.padEnd(12)} ${x.shape.padEnd(44)} k=${x.k}  x${x.speedup.toFixed(2)}`);
    }
    if (!a.shared?.length) out.push('    shared: not measured (ranks sharing it are taken to split its throughput)');
  }
  for (const l of p.links)
    out.push(`  link ${l.kind}${l.peer ? ` ${l.peer}` : ''}: ${l.gbps.toFixed(2)} GB/s, ${l.latency_us.toFixed(0)} µs`);
  for (const l of p.link_errors ?? []) out.push(`  link ${l.kind}${l.peer ? ` ${l.peer}` : ''}: not measured: ${l.error}`);
  return `${out.join('\n')}\n`;
}

/** Entry for the CLI dispatcher; returns the exit code. */
export async function profileCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        json: { type: 'boolean' },
        refresh: { type: 'boolean' },
        quick: { type: 'boolean' },
        preset: { type: 'string' },
        model: { type: 'string' },
        'batch-size': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new CliError(`${(e as Error).message}; ${USAGE}`);
  }
  if (values.help) {
    process.stdout.write(
      `${USAGE}\n  times each kernel of a training step, the copy rates, the local links and the link to each paired agent (at most 30 s); stored for 'shardwise plan'\n`,
    );
    return 0;
  }
  if (values.preset !== undefined && values.model !== undefined) throw new CliError(`give --preset or --model, not both; ${USAGE}`);
  const quick = values.quick ?? false;
  const shapes = shapesOf(values, quick);
  const home = defaultHome();
  const file = profilePath(home);
  const stored = values.refresh ? null : loadMachineProfile(home);
  const covers = stored !== null && shapes.every((s) => stored.sizes?.includes(s.name));
  const profile = covers ? stored : await measureProfile(shapes, quick, home);
  if (!covers) saveMachineProfile(profile, home);
  process.stdout.write(values.json ? `${JSON.stringify(profile)}\n` : formatProfile(profile, covers, file));
  return 0;
}
