// LAN peers as the dashboard sees them: agents announced over mDNS, added by address, or
// paired earlier (the controller keeps their keys). A peer is only believed after it proves
// its pairing key; an announcement or an added address is a hint of where to connect.
import { z } from 'zod';
import { PRECISIONS } from '../precision.js';

/** discovered: announced, not paired · added: typed in, not paired · paired: a key is stored */
export const PEER_STATES = ['discovered', 'added', 'paired'] as const;

export const PeerSchema = z.object({
  /** HOST:PORT */
  address: z.string(),
  name: z.string().nullable(),
  agentId: z.string().nullable(),
  state: z.enum(PEER_STATES),
  /** announced on the LAN right now */
  announced: z.boolean(),
  pairedAt: z.string().nullable(),
});
export type Peer = z.infer<typeof PeerSchema>;

export const PeerAddressSchema = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s/]+):\d{1,5}$/, 'an agent address is HOST:PORT as the agent prints it (e.g. 192.168.1.20:7341)');

/** What the launch form needs before launching: the job the config resolves to. */
export const LaunchPlanSchema = z.object({
  strategy: z.string(),
  world: z.number(),
  micro_batches: z.number(),
  /** tensor-parallel ranks, pipeline stages and data-parallel replicas of the grid (1 where a strategy has none) */
  tp: z.number(),
  pp: z.number(),
  dp: z.number(),
  /** pipeline schedule (strategies pp and 3d) */
  schedule: z.enum(['gpipe', '1f1b']).optional(),
  activation_checkpointing: z.boolean(),
  offload_optimizer: z.string(),
  /** fp32, bf16 or fp16 (the launch form's prediction follows it) */
  precision: z.enum(PRECISIONS).optional(),
  model: z.object({ preset: z.string().optional(), n_layer: z.number(), n_head: z.number(), d_model: z.number(), block_size: z.number() }),
  steps: z.number(),
  batch_size: z.number(),
  /** tokens per sequence (the model's block_size unless the config sets seq_len) */
  seq_len: z.number().optional(),
  /** checkpoint every this many steps (0: only at the end and by minutes) */
  checkpoint_interval: z.number().optional(),
  lr: z.number(),
  dataset: z.string(),
  /** strategies this build runs */
  strategies: z.array(z.string()),
  presets: z.array(z.string()),
  /** where each rank would run (config.placement given): "this machine" or "NAME (HOST:PORT)" of a paired agent that answered */
  placement: z.array(z.object({ rank: z.number(), machine: z.string(), device: z.string().optional() })).optional(),
});
export type LaunchPlan = z.infer<typeof LaunchPlanSchema>;

/** A paired agent's machine and devices (it proved its key to answer), and its clock offset. */
export const PeerDetailSchema = z.object({
  address: z.string(),
  machine: z.object({
    agentName: z.string(),
    hostname: z.string(),
    platform: z.string(),
    arch: z.string(),
    cpus: z.number(),
    memoryBytes: z.number(),
    version: z.string(),
  }),
  adapters: z.array(z.object({ index: z.number(), description: z.string(), backend: z.string(), isSoftware: z.boolean() })),
  /** agent clock - this clock (ms), best of a few pings, and that ping's round trip */
  clock: z.object({ offsetMs: z.number(), rttMs: z.number() }),
});
export type PeerDetail = z.infer<typeof PeerDetailSchema>;
