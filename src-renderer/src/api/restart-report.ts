// What a tab says after it reconnected by itself. The same controller (same `instance`): only the
// connection dropped, runs kept going. A new one: the controller restarted, and the runs that
// were live in this tab's view did not keep going (serve stops its runs on Ctrl-C and a killed
// controller's ranks are killed by their watchdog), so each is named with what its folder now
// says. Pure: the tab's connection module feeds it what it observed.
import type { RunListItem, RunStatusName } from '../../../common/api/index.js';

const LIVE: ReadonlySet<RunStatusName> = new Set(['starting', 'running']);

/** Run ids last seen live through this tab (from runs.list, runs.get and runs.launch results). */
export class LiveRuns {
  private readonly ids = new Set<string>();

  see(id: string, status: RunStatusName) {
    if (LIVE.has(status)) this.ids.add(id);
    else this.ids.delete(id);
  }

  launched(id: string) {
    this.ids.add(id);
  }

  list(): string[] {
    return [...this.ids];
  }
}

export interface RestartNotice {
  restarted: boolean;
  /** one line for the banner */
  text: string;
}

const WHAT: Record<RunStatusName, string> = {
  starting: 'starting again',
  running: 'running again',
  completed: 'completed',
  failed: 'failed',
  stopped: 'stopped',
  interrupted: 'interrupted',
};

function describe(id: string, run: RunListItem | undefined): string {
  if (!run) return `${id}: no longer in the runs folder`;
  const where = `${WHAT[run.status]} at step ${run.step} of ${run.steps}`;
  const resume = run.resumable
    ? ', resumable from its last checkpoint'
    : run.not_resumable_reason
      ? `, not resumable (${run.not_resumable_reason})`
      : '';
  return `${id}: ${where}${resume}`;
}

/**
 * before/after: the controller's instance ids (undefined: an older controller that does not say,
 * counted as a restart: a tab cannot know, and saying runs kept going could be untrue).
 */
export function restartNotice(
  before: string | undefined,
  after: string | undefined,
  wereLive: string[],
  runs: RunListItem[],
): RestartNotice {
  if (before !== undefined && before === after) {
    return { restarted: false, text: 'Reconnected to the same controller: only the connection dropped, runs kept going.' };
  }
  const head = 'The controller restarted, and runs do not outlive it.';
  if (wereLive.length === 0) return { restarted: true, text: `${head} No run was live in this tab's view.` };
  const byId = new Map(runs.map((r) => [r.id, r]));
  const lines = wereLive.map((id) => describe(id, byId.get(id)));
  return {
    restarted: true,
    text: `${head} ${wereLive.length === 1 ? 'The run that was live' : 'The runs that were live'}: ${lines.join('; ')}.`,
  };
}
