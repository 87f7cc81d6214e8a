// Learning rate at optimizer step `step` (1-based): linear warm-up, then cosine decay to
// min_lr at the last step (nanoGPT's get_lr).
export function learningRate(step: number, o: { lr: number; min_lr: number; warmup_steps: number; steps: number }): number {
  if (o.warmup_steps > 0 && step <= o.warmup_steps) return (o.lr * step) / o.warmup_steps;
  const decaySteps = Math.max(1, o.steps - o.warmup_steps);
  const ratio = Math.min(1, Math.max(0, (step - o.warmup_steps) / decaySteps));
  const coeff = 0.5 * (1 + Math.cos(Math.PI * ratio));
  return o.min_lr + coeff * (o.lr - o.min_lr);
}
