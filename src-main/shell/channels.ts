/** Channels the preload forwards start with this; everything else is rejected before it reaches IPC. */
export const CHANNEL_PREFIX = 'shardwise:';
