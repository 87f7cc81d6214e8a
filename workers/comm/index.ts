// Public surface of the communication layer (c10d-style process groups over authenticated
// links): the only module code outside workers/comm imports (.dependency-cruiser.cjs,
// comm-only-through-index). Inside, by concern:
//   init.ts, process-group.ts, work.ts   the process-group API: collectives, p2p, their handles
//   join-world.ts                        a rank process joins the world (rank 0 hosting the store)
//   store.ts                             the rendezvous store (torch's TCPStore)
//   errors.ts, telemetry.ts              what a failure says; spans and bytes per peer
//   algorithms/   ring, tree, chain, halving-doubling, direct, exchange, p2p, and op.ts (the
//                 life of one operation on one rank, which every algorithm drives)
//   transport/    the mesh of links between ranks: frames, the HMAC handshake, ws and raw-TCP
//                 links and endpoints, one peer connection (window, heartbeat)
//   shm/          same-machine payloads through /dev/shm rings beside a link
//   host-memory/  dtypes and reductions, the WebAssembly SIMD kernels, registered memory, scratch
//
//
//   // launcher: serve the rendezvous store, start ranks with RANK, WORLD_SIZE, MASTER_ADDR,
//   // MASTER_PORT and SHARDWISE_RUN_SECRET (names in workers/protocol/comm.ts, COMM_ENV)
//   const store = await StoreServer.start({ secret });
//
//   // rank
//   const world = await initProcessGroup();              // from the environment
//   const dp = await world.newGroup([0, 2]);             // every rank calls it, same order
//   const w = world.allReduce(grads, { op: 'avg', labels: { bucket: 3 } });
//   world.allReduce(bits16, { dtype: 'bfloat16' });     // a Uint16Array is float16 unless told
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
export { joinWorld, type World } from './join-world.js';
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
export { DEFAULT_HEARTBEAT, type HeartbeatOptions } from './transport/connection.js';
export type { LinkKind } from './transport/transport.js';
export { Work } from './work.js';
export { CommError, type CommErrorCode } from './errors.js';
export { StoreServer, StoreClient } from './store.js';
export {
  chunkBounds,
  floatToHalf,
  halfToFloat,
  floatToBfloat16,
  bfloat16ToFloat,
  narrowArray,
  widenArray,
  type Tensor,
  type ReduceOp,
} from './host-memory/dtype.js';
export type { DType } from './transport/frames.js';
export { CommTelemetry, nowMs, type CommSpan, type PeerBytes } from './telemetry.js';
export { memAlloc, memFree, isRegistered } from './host-memory/registered.js';
export { measureReduceNs, type ReduceNs } from './host-memory/reduce-rate.js';
// Whether this machine can carry same-machine payloads through /dev/shm rings.
export { shmSupported } from './shm/shm-ring.js';
// The raw-TCP read path the links use (bench:comm's plain-socket reference rows).
export { adoptReusingReads, connectReusingReads, type ReadSink } from './transport/tcp-link.js';
