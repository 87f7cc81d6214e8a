// The run data the chart builders read: what a run folder holds (metrics.jsonl, spans.jsonl,
// summary.json) and what the controller streams live, in one shape for the dashboard and the
// report. Times are milliseconds on the run's one clock (epoch ms, fractional).

/** One optimizer step as metrics.jsonl logs it ({"type":"step",...}). */
export interface StepMetric {
  step: number;
  loss: number;
  lr?: number;
  grad_norm?: number;
  tokens_per_s?: number;
  step_ms?: number;
  /** per rank: achieved model and hardware TFLOP/s, MFU where the peak is known (common/advisor/rank-tflops.ts) */
  tflops?: Record<string, { model: number; hardware: number; mfu?: number }>;
  /** device bytes per rank and category at the end of the step: {"<rank>":{"params":b,...}} */
  memory?: Record<string, Record<string, number>>;
  /** fp16: the loss scale this step's backward ran with */
  loss_scale?: number;
  /** mixed precision: the update was skipped for an overflow */
  skipped?: boolean;
  /** mixed precision: steps skipped so far */
  skipped_steps?: number;
}

/** A validation point ({"type":"eval","step":s,"val_loss":x}). */
export interface EvalMetric {
  step: number;
  val_loss: number;
}

/**
 * One span of spans.jsonl: compute or communication of one rank during one step.
 *  - kind 'forward' | 'backward': a layer's compute (`name` = layer: embedding, block.0, head)
 *    for micro-batch `micro`;
 *  - kind 'optimizer': the update;
 *  - kind 'comm': a collective or p2p transfer (`name` = op: allReduce, allGather,
 *    reduceScatter, broadcast, send, recv...), `bytes` its payload, `labels` what it carried
 *    (DDP/ZeRO-2: {bucket, params}; ZeRO-3: {layer, phase}; pipeline p2p: {micro, peer}).
 * Pipeline runs add `stage` (the pipeline stage the rank runs) to every forward/backward span;
 * a span with both `stage` and `micro` is a pipeline block (see pipeline.ts).
 */
export interface Span {
  rank: number;
  step: number;
  kind: string;
  name: string;
  start: number;
  end: number;
  micro?: number;
  stage?: number;
  bytes?: number;
  labels?: Record<string, string | number>;
}

/** Predicted bytes of one rank's model states (the strategy's formula), per category. */
export interface ModelStateBytes {
  params: number;
  grads: number;
  optimizer: number;
}
