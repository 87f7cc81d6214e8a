// Stage partition by measured time (torchgpipe's balance_by_time): one rank runs the whole model
// at the micro-batch size on its device for a few iterations, syncing the GPU around every
// layer (the model's layer hooks), and takes the median forward + backward time of the
// embedding, of each block and of the head (ln_f, LM head, loss). partitionByCost then splits
// the blocks so the stages' summed times are balanced. The measurement is noisy, so one rank
// measures and every rank takes its split from the rendezvous store: all stages must agree.
//
// The profile model lives on a device of its own, destroyed afterwards: its buffers do not count
// in the training runtime's peak bytes. Like balance_by_time, it needs the whole model (one
// micro-batch of activations) to fit that device; --partition params does not.
import type { WorldGroup } from '../comm/index.js';
import { nowMs } from '../comm/index.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import type { GptConfig } from '../model/config.js';
import { Gpt, type LayerInfo } from '../model/gpt.js';
import { initialFullParams } from '../model/tp-layout.js';
import type { LayerTimes } from './pipeline-schedule.js';
import { median } from '../../common/stats.js';

export interface ProfileOptions {
  /** adapter selector (the job's device.adapter) */
  adapter?: string;
  /** micro-batch rows and sequence length of the run */
  B: number;
  T: number;
  checkpointing: boolean;
  /** measured iterations (after one warm-up) */
  iters?: number;
  seed: number;
}

export async function profileLayerTimes(config: GptConfig, o: ProfileOptions): Promise<LayerTimes> {
  const rt = new Runtime(await openDevice(o.adapter));
  try {
    const L = config.n_layer;
    const model = new Gpt(rt, config, { B: o.B, T: o.T, checkpointing: o.checkpointing });
    model.params.writeParams(initialFullParams(config, o.seed));
    // deterministic tokens: the time of a layer does not depend on which ids it sees
    const n = o.B * o.T;
    const ids = Uint32Array.from({ length: n }, (_, i) => (i * 7 + 3) % config.vocab_size);
    const targets = Uint32Array.from({ length: n }, (_, i) => (i * 11 + 5) % config.vocab_size);
    const iters = o.iters ?? 3;
    // samples[layer index][iteration]: 0 = embedding, 1..L = blocks, L+1 = head
    const samples: number[][] = Array.from({ length: L + 2 }, () => []);
    let started = 0;
    let it = -1;
    const begin = async () => {
      await rt.sync();
      started = nowMs();
    };
    const end = async (layer: LayerInfo) => {
      await rt.sync();
      if (it >= 0) {
        const s = samples[layer.index]!;
        s[it] = (s[it] ?? 0) + nowMs() - started;
      }
    };
    model.hooks = { beforeForward: begin, afterForward: end, beforeBackward: begin, afterBackward: end };
    for (it = -1; it < iters; it++) {
      model.zeroGrad();
      model.setBatch(ids, targets);
      await model.forward('train');
      await model.backward();
      await rt.sync();
    }
    return { embedding: median(samples[0]!), blocks: samples.slice(1, L + 1).map(median), head: median(samples[L + 1]!) };
  } finally {
    rt.destroy();
  }
}

const KEY = 'pipeline.partition';

/** A partition by measured time and the times it was computed from. */
export interface TimedPartition {
  ranges: { from: number; to: number }[];
  times: LayerTimes;
}

/**
 * Every rank's copy of one partition: rank 0 of the world measured and split (before joining:
 * no peer waits on its heartbeats while its profile kernels compile) and puts the result in the
 * rendezvous store; the others wait for it there.
 */
export async function sharePartition(world: WorldGroup, mine: TimedPartition | null, timeoutMs = 300_000): Promise<TimedPartition> {
  if (world.rank === 0) {
    if (!mine) throw new Error('pipeline partition: rank 0 has no measured partition to share');
    await world.store.set(KEY, JSON.stringify(mine));
    return mine;
  }
  return JSON.parse(await world.store.get(KEY, timeoutMs)) as TimedPartition;
}
