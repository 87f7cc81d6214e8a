// One model size `shardwise profile` times a training step at: the controller builds it from a
// preset or --model (src-main/cli/profile.ts), sends it to the device side in the request
// (workers/cli/profile.ts), whose kernels and shared steps read it (profile-kernels.ts). The
// usual dimension letters (common/model-layout.ts GptConfig): B batch, T sequence, C d_model,
// NH heads, V vocabulary, L blocks.
import { z } from 'zod';

export const ProfileShapeSchema = z.object({
  /** what the shape is called in the profile ("tiny", or the model's letters) */
  name: z.string(),
  B: z.number().int().positive(),
  T: z.number().int().positive(),
  C: z.number().int().positive(),
  NH: z.number().int().positive(),
  V: z.number().int().positive(),
  /** blocks: only AdamW's size (every parameter) depends on it */
  L: z.number().int().positive(),
});
export type ProfileShape = z.infer<typeof ProfileShapeSchema>;
