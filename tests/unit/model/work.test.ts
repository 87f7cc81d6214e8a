// CommandList is how the model records a layer each step: its launches must reach the runtime in the
// order they were prepared, merged into as few rt.run calls as the copies and collectives
// between them allow (so work without collectives records what hand-written calls would).
import { describe, expect, it } from 'vitest';
import type { GpuTensor } from '../../../workers/gpu/allocator.js';
import type { Dispatch, Runtime } from '../../../workers/gpu/runtime.js';
import { CommandList } from '../../../workers/model/command-list.js';

const launch = (label: string) => ({ label }) as unknown as Dispatch;
const tensor = (name: string) => ({ name }) as unknown as GpuTensor;

function recorder() {
  const log: string[] = [];
  const rt = {
    run: (d: readonly Dispatch[]) => log.push(`run ${d.map((x) => x.label).join(',')}`),
    copy: (src: GpuTensor, dst: GpuTensor) => log.push(`copy ${src.name}->${dst.name}`),
  } as unknown as Runtime;
  return { rt, log };
}

describe('CommandList', () => {
  it('merges consecutive launches into one run; copies and collectives keep their places; collectives get the pass', async () => {
    const { rt, log } = recorder();
    const w = new CommandList()
      .copy(tensor('x'), tensor('res2'))
      .run([launch('ln1')])
      .run([launch('qkv'), launch('attn')])
      .collective(async (pass) => void log.push(`g ${pass}`))
      .run([])
      .run([launch('out')]);
    await w.record(rt, 'recompute');
    expect(log).toEqual(['copy x->res2', 'run ln1,qkv,attn', 'g recompute', 'run out']);
  });

  it('append() merges across the seam and leaves the appended work unchanged', async () => {
    const tail = new CommandList().run([launch('b')]).copy(tensor('y'), tensor('z'));
    const head = new CommandList()
      .run([launch('a')])
      .append(tail)
      .append(tail);
    const { rt, log } = recorder();
    await head.record(rt);
    expect(log).toEqual(['run a,b', 'copy y->z', 'run b', 'copy y->z']);
    const again = recorder();
    await tail.record(again.rt);
    expect(again.log).toEqual(['run b', 'copy y->z']);
  });
});
