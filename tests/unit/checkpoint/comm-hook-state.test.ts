// A gradient-compression run's checkpoint: every data-parallel rank's hook state (PowerSGD's error
// feedback differs per rank) gathered to rank 0, written beside the weights, read back bit for
// bit, and refused when the resumed run compresses differently or has another number of ranks.
// tests/dist/data-parallel.test.ts resumes a real PowerSGD run from it bit for bit.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadCheckpoint, saveCheckpoint, type CommHookCheckpoint } from '../../../workers/checkpoint/checkpoint.js';
import type { ProcessGroup } from '../../../workers/comm/index.js';
import { gatherHookStates, type HookState, resumedHookStates } from '../../../workers/comm-hooks/index.js';
import type { GradCompression, TrainJob } from '../../../workers/protocol/train.js';
import { state } from './helpers.js';
import { tinyJob } from '../tiny-job.js';

let run: string;
beforeEach(() => {
  run = mkdtempSync(path.join(tmpdir(), 'sw-hook-'));
});
afterEach(() => rmSync(run, { recursive: true, force: true }));

const ramp = (n: number, salt: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(salt + i) * 1e-3);
const rankState = (salt: number): HookState => ({
  iter: 25,
  tensors: new Map([
    ['error.0', ramp(300, salt)],
    ['error.1', ramp(70, salt + 1)],
    // Q is the same on every rank (all-reduced), the error memory is each rank's own
    ['q.0', ramp(40, 7)],
    ['q.1', ramp(12, 8)],
  ]),
});
const POWERSGD4: CommHookCheckpoint = { setting: { hook: 'powersgd', matrix_approximation_rank: 4 }, ranks: [rankState(1), rankState(2)] };

function job(grad_compression: GradCompression | undefined, world = 2): TrainJob {
  return tinyJob({
    run_dir: run,
    model: { n_layer: 2, n_head: 2, d_model: 8, block_size: 16 },
    data: { dataset: 'builtin:grammar' },
    train: { steps: 30, batch_size: 8, checkpoint_interval: 25, keep_checkpoints: 2 },
    parallel: { strategy: 'ddp', world, micro_batches: 1, bucket_cap_mb: 0.25, first_bucket_mb: 0.0625, grad_compression },
  });
}

/** W in-process ranks whose broadcast and gather (root 0) meet by sequence number, as a real group's do. */
function simulatedGroups(W: number): ProcessGroup[] {
  const slots: { bufs: Float32Array[]; out?: Float32Array; waiters: (() => void)[] }[] = [];
  const seqs = new Array<number>(W).fill(0);
  return Array.from({ length: W }, (_, rank) => {
    /** this rank's buffer into the next slot; `done` runs once every rank's is there */
    const meet = (buf: Float32Array, done: (s: (typeof slots)[number]) => void) => {
      const s = (slots[seqs[rank]++] ??= { bufs: [], waiters: [] });
      s.bufs[rank] = buf;
      const arrived = new Promise<void>((res) => s.waiters.push(res));
      if (s.bufs.filter(Boolean).length === W) {
        done(s);
        for (const w of s.waiters) w();
      }
      return arrived.then(() => s);
    };
    return {
      size: W,
      rank,
      broadcast: (buf: Float32Array, o: { root: number }) => ({
        wait: () => meet(buf, (s) => s.bufs.forEach((b) => b.set(s.bufs[o.root]!))).then(() => buf),
      }),
      gather: (buf: Float32Array, o: { root: number }) => {
        const arrived = meet(buf, (s) => {
          if (s.bufs.some((b) => b.length !== buf.length)) throw new Error('gather: blocks of different sizes');
          s.out = new Float32Array(W * buf.length);
          s.bufs.forEach((b, r) => s.out!.set(b, r * buf.length));
        });
        return { wait: () => arrived.then((s) => (rank === o.root ? s.out! : null)) };
      },
    } as unknown as ProcessGroup;
  });
}

describe('gradient-compression hook state in checkpoints', () => {
  it('every rank gathers its own state to rank 0 (iteration, error feedback, Q), the others get null', async () => {
    const pgs = simulatedGroups(2);
    const [at0, at1] = await Promise.all(pgs.map((pg, r) => gatherHookStates(pg, POWERSGD4.ranks[r]!)));
    expect(at1).toBeNull();
    expect(at0).toHaveLength(2);
    for (const r of [0, 1]) {
      expect(at0![r]!.iter).toBe(25);
      for (const [name, t] of POWERSGD4.ranks[r]!.tensors) expect(at0![r]!.tensors.get(name), `rank ${r} ${name}`).toEqual(t);
    }
  });

  it('is written beside the weights and read back bit for bit, every rank its own; a damaged file is refused', () => {
    const dir = saveCheckpoint(run, { ...state(25), commHook: POWERSGD4 });
    expect(readdirSync(dir).sort()).toEqual(['comm_hook.safetensors', 'manifest.json', 'model.safetensors', 'optimizer.safetensors']);
    const c = loadCheckpoint(dir);
    expect(c.manifest.comm_hook).toEqual({ setting: POWERSGD4.setting, world: 2, iters: [25, 25] });
    expect(c.commHook!.setting).toEqual(POWERSGD4.setting);
    for (const r of [0, 1]) {
      const got = c.commHook!.ranks[r]!;
      expect(got.iter).toBe(25);
      expect([...got.tensors.keys()].sort()).toEqual(['error.0', 'error.1', 'q.0', 'q.1']);
      for (const [name, t] of POWERSGD4.ranks[r]!.tensors) expect(got.tensors.get(name), `rank ${r} ${name}`).toEqual(t);
    }
    // export and eval read the weights alone
    expect(loadCheckpoint(dir, { optimizer: false }).commHook).toBeUndefined();
    const f = path.join(dir, 'comm_hook.safetensors');
    const b = readFileSync(f);
    b[b.length - 5] ^= 0x01;
    writeFileSync(f, b);
    expect(() => loadCheckpoint(dir)).toThrow(`corrupt checkpoint file ${f}: sha256 does not match the manifest`);
  });

  it('a run without compression writes no hook file', () => {
    expect(readdirSync(saveCheckpoint(run, state(3))).sort()).toEqual(['manifest.json', 'model.safetensors', 'optimizer.safetensors']);
    expect(loadCheckpoint(path.join(run, 'checkpoints', 'step-000003')).commHook).toBeUndefined();
  });

  it('resuming: the same compression over as many ranks continues from it; another compression or rank count starts the hook fresh', () => {
    expect(resumedHookStates(POWERSGD4, job({ hook: 'powersgd', matrix_approximation_rank: 4, start_powerSGD_iter: 2 }))).toBe(
      POWERSGD4.ranks,
    );
    // an uncompressed run's checkpoint: a hook starts fresh
    expect(resumedHookStates(undefined, job({ hook: 'powersgd' }))).toBeNull();
    // a resume in another layout (the relayout's notes say so): the per-rank state has no meaning there
    expect(resumedHookStates(POWERSGD4, job(undefined))).toBeNull();
    expect(resumedHookStates(POWERSGD4, job({ hook: 'powersgd', matrix_approximation_rank: 2 }))).toBeNull();
    const fp16: CommHookCheckpoint = { setting: { hook: 'fp16' }, ranks: [rankState(1), rankState(2)] };
    expect(resumedHookStates(fp16, job({ hook: 'bf16' }))).toBeNull();
    expect(resumedHookStates(POWERSGD4, job({ hook: 'powersgd', matrix_approximation_rank: 4 }, 3))).toBeNull();
  });
});
