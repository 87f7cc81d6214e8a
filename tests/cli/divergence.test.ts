// A run that diverges ends with a verdict, not a protocol error: a non-finite loss or
// gradient norm crosses from the rank as what it was (workers/protocol/wire-number.ts), and the run
// ends failed with one sentence saying what became what at which step, the last finite loss, and
// what to change; state.json says the same. Two flag sets (--lr 1e308; --lr 1000 --grad-clip 0), on one device and DDP 2.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { BIN, tempDir } from './helpers.js';

const CLIP = 'or clip gradients \\(train\\.grad_clip = 1; 0 turns clipping off\\)';
const CASES = [
  {
    name: 'single, --lr 1e308',
    args: ['--lr', '1e308'],
    // the first update throws the weights to ~1e308: step 1's validation pass is already NaN
    message:
      /^validation loss became NaN at step 1 \(last finite loss 3\.3148 at step 1\); lower the learning rate \(train\.lr = 1e\+308\)$/,
  },
  {
    name: 'ddp 2, --lr 1e308 --eval-interval 0',
    args: ['--lr', '1e308', '--eval-interval', '0', '--strategy', 'ddp', '--world', '2'],
    message: /^loss became NaN at step 2 \(last finite loss 3\.3148 at step 1\); lower the learning rate \(train\.lr = 1e\+308\)$/,
  },
  {
    name: 'single, --lr 1000 --grad-clip 0',
    args: ['--lr', '1000', '--grad-clip', '0'],
    message: new RegExp(
      `^gradient norm became NaN at step 6 \\(last finite loss 9\\.3\\d\\de\\+12 at step 5\\); lower the learning rate \\(train\\.lr = 1000\\) ${CLIP}$`,
    ),
  },
  {
    name: 'ddp 2, --lr 1000 --grad-clip 0',
    args: ['--lr', '1000', '--grad-clip', '0', '--strategy', 'ddp', '--world', '2'],
    message: new RegExp(
      `^gradient norm became NaN at step 6 \\(last finite loss 9\\.3\\d\\de\\+12 at step 5\\); lower the learning rate \\(train\\.lr = 1000\\) ${CLIP}$`,
    ),
  },
];

function train(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'train', '--preset', 'tiny', '--steps', '10', ...args], {
      env: { ...process.env, SHARDWISE_DEBUG: '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code: code ?? -1, stderr }));
  });
}

it(
  'a diverging run ends failed with the verdict (what became NaN at which step, the last finite loss, what to change), exit 1, and state.json says the same: ' +
    CASES.map((c) => c.name).join('; '),
  async () => {
    const root = tempDir('diverge');
    const runs = await Promise.all(
      CASES.map(async (c, i) => {
        const out = path.join(root, String(i));
        return { c, out, ...(await train([...c.args, '--out', out])) };
      }),
    );
    for (const { c, out, code, stderr } of runs) {
      const lines = stderr.trim().split('\n');
      const error = lines.at(-1)!.replace(/^shardwise: /, '');
      expect(error, `${c.name}: ${stderr}`).toMatch(c.message);
      expect(
        lines.filter((l) => l.startsWith('shardwise:')),
        c.name,
      ).toHaveLength(1);
      expect(code, c.name).toBe(1);
      const state = JSON.parse(readFileSync(path.join(out, 'state.json'), 'utf8'));
      expect([state.status, state.error], c.name).toEqual(['failed', error]);
    }
  },
  180_000,
);
