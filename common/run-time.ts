// A run's two durations. Training time: the sum of its steps' times (what the ranks spent on
// steps). Wall time: from its creation to its folder's last update, which counts every pause
// between a stop and a resume (a run resumed after three minutes trained ~50 s but spanned
// 3 min 29 s): shown alone it read as the training time.

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** the sum of the steps' step_ms (each step once: a resumed run's rows do not repeat steps) */
export function trainingMs(steps: readonly { step?: number; step_ms?: number }[]): number {
  let ms = 0;
  for (const s of steps) if (typeof s.step_ms === 'number' && Number.isFinite(s.step_ms)) ms += s.step_ms;
  return ms;
}

export function wallMs(state: { created_at: string; updated_at: string }): number {
  return Date.parse(state.updated_at) - Date.parse(state.created_at);
}

/** "training 50 s · wall 3 min 29 s" */
export function runTimesLine(state: { created_at: string; updated_at: string }, steps: readonly { step_ms?: number }[]): string {
  return `training ${formatDuration(trainingMs(steps))} · wall ${formatDuration(wallMs(state))}`;
}
