// What the advisor predicted for a run's own layout, kept in its folder as prediction.json
// (written once at launch, atomically) so the run view and the report can put the measured
// numbers beside it: the request the controller planned (the run's model, batch, sequence length
// and ranks), where the cost model's speeds came from, and the LayoutPlan of the run's layout.
import { z } from 'zod';
import { AdviseRequestSchema, AdviseResultSchema, LayoutPlanSchema } from '../advisor/types.js';

export const RunPredictionSchema = z.object({
  /** ISO time the controller predicted it */
  predicted_at: z.string(),
  request: AdviseRequestSchema,
  profile: AdviseResultSchema.shape.profile,
  plan: LayoutPlanSchema,
  notes: z.array(z.string()),
});
export type RunPrediction = z.infer<typeof RunPredictionSchema>;
