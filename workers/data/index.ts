export * from './errors.js';
export * from './prng.js';
export * from './tokenizer.js';
export * from './builtin.js';
export * from './text-file.js';
export * from './sampler.js';
export * from './dataset.js';
