// The typed API, for both the controller (src-main) and the dashboard (src-renderer).
export * from './annotations.js';
export * from './devices.js';
export * from './elastic.js';
export * from './errors.js';
export * from './events.js';
export * from './export-job.js';
export * from './host.js';
export * from './launch-config.js';
export * from './methods.js';
export * from './peers.js';
export * from './prediction.js';
export * from './runs.js';
export * from './wire.js';
export * from './validate.js';
export * from './ipc.js';
