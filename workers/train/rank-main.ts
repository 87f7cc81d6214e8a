// Entry of a training rank process. The controller forks it with an IPC channel, sends one
// job (validated here: data, never code), and receives step, eval, checkpoint, done and error
// messages. Exit code 0 only after 'done', or 'stopped' (SIGTERM: workers/run-control/).
import { type RankMessage, TrainJobSchema } from '../protocol/train.js';
import { encodeNonFinite } from '../protocol/wire-number.js';
import { listenForStop, reportStop } from '../run-control/stop-request.js';
import { runTraining } from './trainer.js';

function send(message: RankMessage): Promise<void> {
  const m = encodeNonFinite(message); // a diverged loss must not cross JSON as null
  return new Promise((resolve) => {
    if (!process.send) {
      process.stdout.write(`${JSON.stringify(m)}\n`);
      resolve();
      return;
    }
    process.send(m, undefined, {}, () => resolve());
  });
}

function oneLine(e: unknown): { message: string; kind: string } {
  const err = e instanceof Error ? e : new Error(String(e));
  return { message: err.message.split('\n')[0]!, kind: err.name };
}

// the controller is gone (crashed or killed): a rank never trains on as an orphan
process.on('disconnect', () => process.exit(1));
// A Ctrl-C in the controller's terminal reaches its whole process group, ranks included. The
// controller answers it by stopping the run (SIGTERM to each rank, the run stays resumable); a
// rank that died of the SIGINT first would make the run look failed instead.
process.on('SIGINT', () => {});
listenForStop();

process.once('message', (raw: unknown) => {
  const msg = raw as { type?: string; job?: unknown };
  const parsed = TrainJobSchema.safeParse(msg?.job);
  if (msg?.type !== 'job' || !parsed.success) {
    void send({
      type: 'error',
      message: `invalid job from controller: ${parsed.success ? 'expected {type:"job"}' : parsed.error.issues[0]?.message}`,
      kind: 'ProtocolError',
    }).then(() => process.exit(2));
    return;
  }
  const rank = Number(process.env.RANK ?? 0);
  runTraining(parsed.data, send)
    .then(() => reportStop(rank, send))
    .then(() => process.exit(0))
    .catch(async (e: unknown) => {
      if (process.env.SHARDWISE_DEBUG) process.stderr.write(`${(e as Error).stack}\n`);
      await send({ type: 'error', rank, ...oneLine(e) });
      process.exit(1);
    });
});
