// Public surface of the communication layer (c10d-style process groups over authenticated ws).
//
//   // launcher: serve the rendezvous store, start ranks with RANK, WORLD_SIZE, MASTER_ADDR,
//   // MASTER_PORT and SHARDWISE_RUN_SECRET (names in workers/protocol/comm.ts, COMM_ENV)
//   const store = await StoreServer.start({ secret });
//
//   // rank
//   const world = await initProcessGroup();              // from the environment
//   const dp = await world.newGroup([0, 2]);             // every rank calls it, same order
//   const w = world.allReduce(grads, { op: 'avg', labels: { bucket: 3 } });
//   ...overlap compute...
//   await w.wait();                                      // rejects with a CommError naming op, group, seq, peer
//   const shard = await world.reduceScatter(grads).wait();   // block `rank` of chunkBounds(len, size)
//   const full = await world.allGather(shard, { counts }).wait();
//   world.send(acts, 1, { tag: 7 }); await world.recv(buf, 0, { tag: 7 }).wait();
//   world.telemetry.takeSpans(); world.peerBytes();
//   const bucket = memAlloc(n);   // registered memory (as ncclMemAlloc): reduced in place, no copies
//   memFree(bucket);
//   world.destroy();
export { initProcessGroup, optionsFromEnv, WorldGroup, type InitOptions, type NewGroupOptions } from './init.js';
export {
  ProcessGroup,
  DEFAULT_TUNING,
  type CollectiveTuning,
  type AllReduceOptions,
  type ReduceScatterOptions,
  type AllGatherOptions,
  type RootedOptions,
  type ReduceOptions,
  type P2POptions,
  type OpOptions,
  type GatherOptions,
  type ScatterOptions,
  type AllToAllOptions,
} from './process-group.js';
export { DEFAULT_HEARTBEAT, type HeartbeatOptions } from './connection.js';
export type { LinkKind } from './transport.js';
export { Work } from './work.js';
export { CommError, type CommErrorCode } from './errors.js';
export { StoreServer, StoreClient } from './store.js';
export { chunkBounds, floatToHalf, halfToFloat, type Tensor, type ReduceOp } from './dtype.js';
export { CommTelemetry, nowMs, type CommSpan, type PeerBytes } from './telemetry.js';
export { memAlloc, memFree, isRegistered } from './registered.js';
