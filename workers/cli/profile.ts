// `node dist/workers/cli/profile.js REQUEST_JSON`: the device side of `shardwise profile`. For
// every WebGPU adapter: each kernel of a training step timed at the asked shapes and the host <->
// device copy rates, and how much throughput two processes get from it together against one,
// each running a rank's whole step and one kernel at a time (profile-sharing.ts); then the links between two local ranks (shm and tcp, through the real comm
// layer). Prints one JSON object (ProfileWorkerResult) on stdout. The controller runs it as a
// child with a deadline and checks the answer (src-main/cli/profile.ts): it never loads a GPU
// driver itself. With `--link-peer PLAN` it is the other rank of a link test instead, with
// `--share-peer ADAPTER` the other process of a sharing test.
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { AdapterProfileSchema, type KernelTiming, LinkProfileSchema } from '../../common/advisor/profile.js';
import { shmSupported } from '../comm/index.js';
import { listAdapters, openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { ProfileShapeSchema } from '../protocol/profile-shape.js';
import { profileCopies, profileKernels } from './profile-kernels.js';
import { profileLaunchCosts } from './profile-launch.js';
import { linkPeer, profileLink } from './profile-links.js';
import { profileSharing, sharePeer } from './profile-sharing.js';

export const ProfileRequestSchema = z.object({
  shapes: z.array(ProfileShapeSchema).min(1),
  kernel: z.object({ roundMs: z.number().positive(), rounds: z.number().int().positive() }),
  /** ms from the start the kernels may take; past it each case is timed once (the links still run) */
  kernel_ms: z.number().positive().optional(),
  copy: z.object({ bytes: z.number().int().positive(), rounds: z.number().int().positive() }),
  /** k processes on one adapter at once (profile-sharing.ts); absent: not measured */
  share: z
    .object({
      k: z.number().int().min(2),
      roundMs: z.number().positive(),
      windowMs: z.number().positive(),
      minRounds: z.number().int().positive(),
    })
    .optional(),
  /** ms from the start the sharing measurement may end by; past it the remaining steps and sizes are left out */
  share_ms: z.number().positive().optional(),
  link: z.object({ pings: z.number().int().positive(), bytes: z.number().int().positive(), sends: z.number().int().positive() }),
  /** adapters to profile (indices); default all */
  adapters: z.array(z.number().int().nonnegative()).optional(),
});
export type ProfileRequest = z.infer<typeof ProfileRequestSchema>;

/** memory and peak are the controller's to add (it knows the system GPUs and device classes) */
export const ProfileWorkerResultSchema = z.object({
  adapters: z.array(AdapterProfileSchema),
  links: z.array(LinkProfileSchema),
  /** link kinds that could not be measured here, with why */
  skipped: z.array(z.string()),
});
export type ProfileWorkerResult = z.infer<typeof ProfileWorkerResultSchema>;

const SELF = fileURLToPath(import.meta.url);

async function profile(req: ProfileRequest): Promise<ProfileWorkerResult> {
  const start = Date.now();
  const deadline = req.kernel_ms !== undefined ? start + req.kernel_ms : undefined;
  const shareDeadline = req.share_ms !== undefined ? start + req.share_ms : undefined;
  const { found } = await listAdapters();
  const picked = found.filter((f) => !req.adapters || req.adapters.includes(f.report.index));
  const adapters: ProfileWorkerResult['adapters'] = [];
  for (const f of picked) {
    const rt = new Runtime(await openDevice(f.report.index));
    try {
      const kernels: KernelTiming[] = [];
      for (const s of req.shapes) {
        for (const k of await profileKernels(rt, s, { ...req.kernel, deadline })) kernels.push({ ...k, shape: `${s.name} ${k.shape}` });
      }
      const copies = await profileCopies(rt, req.copy.bytes, req.copy.rounds);
      const fixed = await profileLaunchCosts(rt, req.kernel.roundMs, req.kernel.rounds);
      // a shape's step is about one pass over its kernels (timed above)
      const stepEstimateMs = (s: { name: string }) =>
        kernels.filter((k) => !k.precision && k.shape.startsWith(`${s.name} `)).reduce((t, k) => t + k.ms, 0);
      const shared = req.share ? await profileSharing(rt, f.report.index, req.shapes, req.share, SELF, shareDeadline, stepEstimateMs) : [];
      adapters.push({
        index: f.report.index,
        name: f.report.description || f.report.device || f.report.vendor,
        backend: f.report.backend,
        is_software: f.report.isSoftware,
        kernels,
        ...(shared.length ? { shared } : {}),
        ...copies,
        ...fixed,
      });
    } finally {
      rt.destroy();
    }
  }
  const links = [];
  const skipped: string[] = [];
  if (shmSupported()) links.push(await profileLink('shm', req.link, SELF));
  else skipped.push('shm: this machine cannot share /dev/shm rings between processes');
  links.push(await profileLink('tcp', req.link, SELF));
  return { adapters, links, skipped };
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--link-peer') return linkPeer(argv[1] ?? '{}');
  if (argv[0] === '--share-peer') {
    await sharePeer(argv[1] ?? '0');
    process.exit(0); // Dawn keeps native handles alive
  }
  const parsed = ProfileRequestSchema.safeParse(JSON.parse(argv[0] ?? 'null'));
  if (!parsed.success) throw new Error(`profile worker: bad request: ${parsed.error.issues[0]?.message}`);
  const result = await profile(parsed.data);
  await new Promise<void>((r) => process.stdout.write(`${JSON.stringify(result)}\n`, () => r()));
  // Dawn keeps native handles alive: leave once the answer is out
  process.exit(0);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`profile: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
