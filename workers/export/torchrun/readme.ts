// The README of an exported PyTorch job: how to run it, what each part of the layout became in
// PyTorch's terms, and what does not map (with why), from the plan (plan.ts).
import type { GptConfig } from '../../model/config.js';
import { precisionOf, type ParallelSpec, type TrainJob } from '../../protocol/train.js';
import type { TorchPlan } from './plan.js';

export function exportReadme(o: {
  job: TrainJob;
  par: ParallelSpec;
  plan: TorchPlan;
  step: number;
  cfg: GptConfig;
  cluster: boolean;
  /** where the job writes its run folder, relative to the job's folder (default run) */
  runDir?: string;
}): string {
  const { job, par, plan, step, cfg } = o;
  const runDir = o.runDir ?? 'run';
  const t = job.train;
  const lines = [
    `# PyTorch job: ${par.strategy} over ${par.world} rank(s), ${precisionOf(job)}, steps ${step + 1}–${t.steps}`,
    '',
    `Exported by \`shardwise export --format torchrun\`. It continues the Shardwise run from step ${step} and trains to step ${t.steps}`,
    'with the same model, batches, optimizer, clipping and learning-rate schedule, so its per-step losses are the ones Shardwise',
    'logs (fp32: within 1e-4 relative on a CPU; see docs/export-pytorch.md for the measured figures).',
    '',
    '## Run it',
    '',
    '```sh',
    'bash launch.sh                      # this machine: torchrun --standalone, or the ranks started with its environment',
    'NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 bash launch.sh   # two machines (NODE_RANK=1 on the other)',
    'SHARDWISE_PYTHON=/path/to/python bash launch.sh   # an interpreter with torch, if not /usr/bin/python3 or python3',
    '```',
    '',
    `The job writes a Shardwise run folder in \`${runDir}/\` (config.json, state.json, metrics.jsonl, summary.json): \`shardwise serve --runs\``,
    `on its parent lists it, Compare overlays it with the original, and \`shardwise report ${runDir} --format html\` reads it. Hugging Face GPT-2 folders`,
    `of the weights land in \`${runDir}/hf/step-NNNNNN/\` at every checkpoint interval and at the end; \`shardwise train --init-from ${runDir}/hf/step-NNNNNN\``,
    'starts a Shardwise run from one. `bash launch.sh --run-dir ../runs/NAME` writes the run folder there instead (relative to this folder),',
    'beside the original in the folder `shardwise serve --runs` lists.',
    '',
    'On CUDA the ranks use NCCL, on a CPU gloo. torchrun fails on Python 3.11 with PyTorch below 2.0 (inside its elastic agent); there',
    'launch.sh starts the processes itself with the variables torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and says so.',
    '',
    '## Files',
    '',
    '| file | what |',
    '|---|---|',
    '| `train.py` | the GPT, the sampler, AdamW, the loop and the run folder; plain PyTorch, no other package |',
    '| `launch.sh` | torchrun (or its environment) with this layout |',
    "| `job.json` | model, hyperparameters, data position and the layout in PyTorch's terms (`plan`) |",
    '| `start/model.safetensors`, `start/config.json` | the weights to start from, Hugging Face GPT-2 layout (Conv1D weights are (in, out); LM head tied to `transformer.wte.weight`) |',
    "| `start/optimizer.safetensors` | AdamW's moments (`exp_avg.NAME`, `exp_avg_sq.NAME`, the same layout); its step count is in job.json |",
    '| `data/text.txt`, `vocab.json` | the dataset and its character vocabulary (one token per code point) |',
    ...(o.cluster
      ? [
          '| `ds_config.json` | DeepSpeed: batch sizes, clipping, ZeRO stage, precision and loss scaler, AdamW, schedule |',
          '| `megatron_args.txt` | Megatron-LM: tensor and pipeline parallel sizes, micro-batches, model shape, precision |',
        ]
      : []),
    '',
    '## What maps to what',
    '',
    '| Shardwise | PyTorch |',
    '|---|---|',
    `| GPT ${cfg.n_layer} layers, ${cfg.n_head} heads, d_model ${cfg.d_model}, context ${cfg.block_size}, vocabulary ${cfg.vocab_size} | \`GPT\` in train.py: pre-layernorm (eps 1e-5), GELU(approximate="tanh"), tied LM head, no dropout |`,
    `| AdamW lr ${t.lr} → ${t.min_lr}, betas (${t.beta1}, ${t.beta2}), eps ${t.eps}, weight decay ${t.weight_decay} on matrices and embeddings | \`torch.optim.AdamW\` with two parameter groups; linear warm-up ${t.warmup_steps} steps then cosine, set per step |`,
    `| clipping at global norm ${t.grad_clip} | \`torch.nn.utils.clip_grad_norm_\` |`,
    `| batches: seed ${t.seed}, ${t.batch_size} sequences of ${t.seq_len ?? job.model.block_size} per step, step ${step} next | the same splitmix32 sampler in train.py |`,
    ...plan.mapping.map(([a, b]) => `| ${a} | \`${b}\` |`),
    '',
    '## What does not map',
    '',
    ...notMapped(plan).map((u) => `- ${u}`),
    '',
  ];
  return lines.join('\n');
}

/** The README's "What does not map" lines (the API's export answer shows the same). */
export function notMapped(plan: TorchPlan): string[] {
  return [
    ...(plan.unmapped.length ? plan.unmapped : ['Nothing in the layout: every setting of it has a PyTorch counterpart.']),
    "Telemetry: PyTorch reports memory by tensor (parameters, gradients, optimizer state; on CUDA `torch.cuda.max_memory_allocated`), not Shardwise's activation and workspace categories, and no per-layer spans.",
  ];
}
