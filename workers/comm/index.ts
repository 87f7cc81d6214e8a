// Public surface of the communication layer.
export { initProcessGroup, optionsFromEnv, WorldGroup, type InitOptions, type NewGroupOptions } from './init.js';
export { ProcessGroup, DEFAULT_TUNING, type CollectiveTuning, type AllReduceOptions, type ReduceScatterOptions, type AllGatherOptions, type RootedOptions, type ReduceOptions, type P2POptions, type OpOptions } from './process-group.js';
export { Work } from './work.js';
export { CommError, type CommErrorCode } from './errors.js';
export { StoreServer, StoreClient } from './store.js';
export { chunkBounds, floatToHalf, halfToFloat, type Tensor, type ReduceOp } from './dtype.js';
export { CommTelemetry, nowMs, type CommSpan, type PeerBytes } from './telemetry.js';
