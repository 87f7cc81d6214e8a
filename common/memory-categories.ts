// Memory categories shared by the ranks (which count bytes), the controller (which stores
// them) and the dashboard (which stacks them per GPU). Imports nothing runtime-specific.
export const MEMORY_CATEGORIES = ['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace'] as const;
export type MemoryCategory = (typeof MEMORY_CATEGORIES)[number];
export type BytesByCategory = Record<MemoryCategory, number>;
