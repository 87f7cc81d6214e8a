// The typed API between the dashboard and the controller (one API, two transports).
// Every method is a params schema and a result schema; both ends validate with them. A
// transport (WebSocket in web mode, Electron IPC in the shell) carries `call(method, params)`
// and a run's event stream; the renderer cannot tell which one it talks to.
import { z } from 'zod';
import { AdviseRequestSchema, AdviseResultSchema } from '../advisor/types.js';
import { DevicesViewSchema, LiveDevicesViewSchema } from './devices.js';
import type { RunEvent } from './events.js';
import { LaunchConfigSchema, RunIdSchema } from './launch-config.js';
import { LaunchPlanSchema, PeerAddressSchema, PeerDetailSchema, PeerSchema } from './peers.js';
import { AnnotateParamsSchema, RunMetaSchema } from './annotations.js';
import { HostRowSchema } from './host.js';
import { ResumeLayoutSchema } from './elastic.js';
import { ExportParamsSchema, ExportResultSchema } from './export-job.js';
import { LogRowSchema, MetricRowSchema, RunDetailSchema, RunListItemSchema, SpanRowSchema } from './runs.js';

const RunRef = z.strictObject({ runId: RunIdSchema });
const Ok = z.object({ ok: z.literal(true) });

export const API_METHODS = {
  /** this machine's devices (cached; probed at start and every few minutes) */
  'devices.list': { params: z.strictObject({}), result: DevicesViewSchema },
  /** probe again now */
  'devices.refresh': { params: z.strictObject({}), result: DevicesViewSchema },
  /** the system GPUs' live fields (utilisation, memory, temperature) read again (nvidia-smi, cached ~2 s), adapters not probed */
  'devices.live': { params: z.strictObject({}), result: LiveDevicesViewSchema },
  /** every run folder in the runs root, newest first */
  'runs.list': { params: z.strictObject({}), result: z.object({ runs: z.array(RunListItemSchema) }) },
  /** config, state, summary and checkpoints of one run */
  'runs.get': { params: RunRef, result: RunDetailSchema },
  /** metrics.jsonl rows (step, eval, checkpoint) with step >= fromStep */
  'runs.metrics': {
    params: z.strictObject({ runId: RunIdSchema, fromStep: z.number().int().nonnegative().optional() }),
    result: z.object({ rows: z.array(MetricRowSchema) }),
  },
  /** spans.jsonl rows with fromStep <= step <= toStep, at most `limit` (default 50 000) */
  'runs.spans': {
    params: z.strictObject({
      runId: RunIdSchema,
      fromStep: z.number().int().nonnegative().optional(),
      toStep: z.number().int().nonnegative().optional(),
      limit: z.number().int().positive().max(500_000).optional(),
    }),
    result: z.object({ spans: z.array(SpanRowSchema), truncated: z.boolean() }),
  },
  /** the last `limit` (default 1000) lines of logs.jsonl: controller messages and rank output */
  'runs.logs': {
    params: z.strictObject({ runId: RunIdSchema, limit: z.number().int().positive().max(100_000).optional() }),
    result: z.object({ lines: z.array(LogRowSchema) }),
  },
  /** host.jsonl rows (CPU load and RAM per machine, about one a second while the run went) with time >= fromTime */
  'runs.host': {
    params: z.strictObject({ runId: RunIdSchema, fromTime: z.number().nonnegative().optional() }),
    result: z.object({ rows: z.array(HostRowSchema) }),
  },
  /** start a run on this machine's devices; resolves once its folder exists */
  'runs.launch': { params: z.strictObject({ config: LaunchConfigSchema }), result: z.object({ runId: z.string(), dir: z.string() }) },
  /** stop a live run: every rank process is reaped; the run ends as `stopped` (resumable) */
  'runs.stop': { params: RunRef, result: Ok },
  /** continue a failed, stopped or interrupted run from its latest checkpoint; `layout`: in another layout (absent fields keep the run's) */
  'runs.resume': {
    params: z.strictObject({ runId: RunIdSchema, steps: z.number().int().positive().optional(), layout: ResumeLayoutSchema.optional() }),
    result: z.object({ runId: z.string(), fromStep: z.number() }),
  },
  /** write a checkpoint of the run as a PyTorch job (torchrun) into exports/ in the runs root; its run folder appears beside the run once it runs */
  'runs.export': { params: ExportParamsSchema, result: ExportResultSchema },
  /** set a run's tags (the whole list) and/or note, kept in its folder's meta.json; returns both */
  'runs.annotate': { params: AnnotateParamsSchema, result: RunMetaSchema },
  /** remove a run folder; refused while the run is live */
  'runs.delete': { params: RunRef, result: Ok },
  /** start receiving the run's events ({event:'run', runId, data}) */
  'runs.subscribe': { params: RunRef, result: Ok },
  'runs.unsubscribe': { params: RunRef, result: Ok },
  /** resolve a launch config without launching: the job it becomes, or the ValidationError runs.launch would give */
  'runs.plan': { params: z.strictObject({ config: LaunchConfigSchema }), result: LaunchPlanSchema },
  /** every layout the devices allow for a model and batch, with predicted memory per rank and step time, ranked (fitting first, fastest first); refuses a field it cannot plan */
  'runs.advise': { params: AdviseRequestSchema, result: AdviseResultSchema },
  /** LAN agents: announced over mDNS, added by address, or paired */
  'peers.list': { params: z.strictObject({}), result: z.object({ peers: z.array(PeerSchema) }) },
  /** remember an agent's address (pair it next, with the code it shows) */
  'peers.add': { params: z.strictObject({ address: PeerAddressSchema }), result: PeerSchema },
  /** pair with the agent at `address` using its one-time code; the key is stored on this machine */
  /** a paired agent's machine, devices (hardware or software) and clock offset; it must prove the stored key */
  'peers.inspect': { params: z.strictObject({ address: PeerAddressSchema }), result: PeerDetailSchema },
  'peers.pair': { params: z.strictObject({ address: PeerAddressSchema, code: z.string().min(1).max(64) }), result: PeerSchema },
} as const;

export type ApiMethods = typeof API_METHODS;
export type MethodName = keyof ApiMethods;
export type MethodParams<M extends MethodName> = z.input<ApiMethods[M]['params']>;
export type MethodResult<M extends MethodName> = z.output<ApiMethods[M]['result']>;
export const METHOD_NAMES = Object.keys(API_METHODS) as MethodName[];

/** What the dashboard programs against, whatever the transport. */
export interface ShardwiseApi {
  call<M extends MethodName>(method: M, params: MethodParams<M>): Promise<MethodResult<M>>;
  /** events of one run until the returned function is called */
  subscribe(runId: string, onEvent: (e: RunEvent) => void): Promise<() => Promise<void>>;
}
