// The `shardwise` command line (a contract: tests, benchmarks and users call these names; flags may
// grow, names stay). Each command is one module; an error is
// its whole message on stderr, one line per problem, each "shardwise: ...", and a non-zero exit
// code (a stray ZodError as its issues, "path: message", not its JSON).
import { ZodError } from 'zod';
import { devicesCommand } from './devices.js';
import { CliError } from './errors.js';
import { planCommand } from './plan.js';
import { agentCommand, pairCommand, peerCommand, peersCommand } from './peers.js';
import { profileCommand } from './profile.js';
import { reportCommand } from './report.js';
import { serveCommand } from './serve.js';
import { trainCommand } from './train.js';
import { runWorkerTool } from './worker-tool.js';
import { zodIssueLines } from './zod-issues.js';

const HELP = `shardwise — train GPT-style transformers with WebGPU, on one device or many

  shardwise train [--preset tiny|small] [--steps N] [--dataset builtin:NAME|PATH] [--seed S] [--out DIR] [--json]
                  [--config FILE] [--batch-size B] [--lr X] [--eval-interval N] [--checkpoint-interval N]
                  [--checkpoint-minutes T] [--activation-checkpointing] [--precision fp32|bf16|fp16] [--device INDEX|NAME] [--resume RUN_DIR|CHECKPOINT_DIR] [--init-from HF_DIR]
                  [--strategy single|dp|ddp|zero1|zero2|zero3|tp|pp] [--world N] [--tp T] [--micro-batches M] [--bucket-cap-mb X]
                  [--strategy ddp --grad-compression none|fp16|bf16|powersgd[:R] [--powersgd-start-iter N]]
                  [--strategy zero1|zero2 --grad-compression none|fp16|bf16]
                  [--strategy pp --pp P [--schedule gpipe|1f1b] [--micro-batches M] [--partition params|time]]
                  [--strategy 3d --dp D --tp T --pp P [--schedule gpipe|1f1b] [--micro-batches M]]
                  [--elastic MIN:MAX [--max-restarts N]]  (survive lost ranks and machines: shrink to MIN ranks, grow back to MAX; default 3 restarts)
                  (each setting: default < --preset < --config FILE (several merge in order, the last winning; one file's keys must agree) < a flag)
  shardwise train --resume RUN_DIR|CHECKPOINT_DIR [--steps N] [--json] [--placement ...]
                  [--strategy S] [--world N] [--dp D] [--tp T] [--pp P] [--schedule S] [--micro-batches M] [--precision P]
                  [--offload-optimizer cpu|none] [--grad-compression G] [--batch-size B]
                  (continues in another layout: the weights, AdamW moments, data position and loss scaler carry over; notes say what changed)
  shardwise devices [--json]
  shardwise profile [--json] [--refresh] [--preset NAME[,NAME...]|--model JSON] [--batch-size B] [--quick]
  shardwise eval RUN_DIR --text FILE [--json]
  shardwise sample RUN_DIR [--prompt TEXT] [--tokens N] [--temperature X] [--seed S]
  shardwise export RUN_DIR --format hf [--dtype fp32|bf16|fp16] [--out DIR]
  shardwise export RUN_DIR|CHECKPOINT_DIR --format torchrun [--strategy S --world N --micro-batches M --bucket-cap-mb X --grad-compression G] [--out DIR]
  shardwise agent [--port P] [--host H] [--name NAME] [--state-dir DIR] [--mdns on|off]
  shardwise peers [--wait SECONDS] [--json]
  shardwise pair HOST:PORT --code CODE [--json]
  shardwise peer HOST:PORT [--json]
  shardwise plan --preset NAME|--model JSON --batch-size B --seq-len T [--precision P] [--placement ...|--devices N]
                 [--what-if devices=N,memory_gb=G,tflops=F,link_gbps=L,latency_us=U] [--json]
  shardwise report RUN_DIR --format html|pdf|trace|csv [--out FILE]
  shardwise serve [--port P] [--host H] [--runs DIR] [--demo]
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return command === undefined ? 2 : 0;
    case 'train':
      if (rest.includes('--help')) {
        process.stdout.write(HELP);
        return 0;
      }
      return trainCommand(rest);
    case 'devices':
      return devicesCommand(rest);
    case 'profile':
      return profileCommand(rest);
    case 'agent':
      return agentCommand(rest);
    case 'peers':
      return peersCommand(rest);
    case 'pair':
      return pairCommand(rest);
    case 'peer':
      return peerCommand(rest);
    case 'plan':
      return planCommand(rest);
    case 'report':
      return reportCommand(rest);
    case 'serve':
      return serveCommand(rest);
    case 'eval':
    case 'sample':
    case 'export':
      return runWorkerTool(command, rest);
    default:
      throw new CliError(`unknown command "${command}"; run 'shardwise help' for the commands`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    const lines =
      e instanceof ZodError ? zodIssueLines('invalid data', e.issues) : (e instanceof Error ? e.message : String(e)).split('\n');
    process.stderr.write(
      lines
        .filter((l) => l.trim() !== '')
        .map((l) => `shardwise: ${l}\n`)
        .join(''),
    );
    if (process.env.SHARDWISE_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    process.exit(e instanceof CliError ? e.exitCode : 1);
  },
);
