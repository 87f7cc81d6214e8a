// The native menu as data: File (New run, Runs, Export report as HTML / PDF / Trace / CSV…, Quit),
// View (reload and devtools in development only), Help (About). Items carry a command the main
// process runs (main.ts); building the template needs no Electron runtime, so
// tests/unit/shell-ipc.test.ts checks it.
import type { MenuItemConstructorOptions } from 'electron';

export type ReportFormat = 'html' | 'pdf' | 'trace' | 'csv';
export type MenuCommand = { kind: 'go'; hash: '#/launch' | '#/runs' } | { kind: 'export'; format: ReportFormat } | { kind: 'about' };

export const EXPORT_ITEMS: readonly { format: ReportFormat; label: string }[] = [
  { format: 'html', label: 'Export Report as HTML…' },
  { format: 'pdf', label: 'Export Report as PDF…' },
  { format: 'trace', label: 'Export Trace (Perfetto / chrome://tracing)…' },
  { format: 'csv', label: 'Export Metrics as CSV…' },
];

export interface MenuOptions {
  /** development build: View gets reload and devtools */
  dev: boolean;
  platform: NodeJS.Platform;
  /** whether the window shows a run (#/run/ID): the export items are enabled only then */
  runOpen: boolean;
}

export function menuTemplate(o: MenuOptions, run: (c: MenuCommand) => void): MenuItemConstructorOptions[] {
  const file: MenuItemConstructorOptions = {
    label: 'File',
    submenu: [
      { id: 'new-run', label: 'New Run…', accelerator: 'CmdOrCtrl+N', click: () => run({ kind: 'go', hash: '#/launch' }) },
      { id: 'runs', label: 'Runs', accelerator: 'CmdOrCtrl+R', click: () => run({ kind: 'go', hash: '#/runs' }) },
      { type: 'separator' },
      ...EXPORT_ITEMS.map((e): MenuItemConstructorOptions => ({
        id: `export-${e.format}`,
        label: e.label,
        enabled: o.runOpen,
        click: () => run({ kind: 'export', format: e.format }),
      })),
      { type: 'separator' },
      { role: 'quit' },
    ],
  };
  const edit: MenuItemConstructorOptions = { role: 'editMenu' };
  const view: MenuItemConstructorOptions = {
    label: 'View',
    submenu: [
      ...(o.dev ? ([{ role: 'reload' }, { role: 'toggleDevTools' }, { type: 'separator' }] as MenuItemConstructorOptions[]) : []),
      { role: 'resetZoom' },
      { role: 'zoomIn' },
      { role: 'zoomOut' },
      { type: 'separator' },
      { role: 'togglefullscreen' },
    ],
  };
  const help: MenuItemConstructorOptions = {
    role: 'help',
    submenu: [{ id: 'about', label: 'About Shardwise', click: () => run({ kind: 'about' }) }],
  };
  return [...(o.platform === 'darwin' ? [{ role: 'appMenu' } as MenuItemConstructorOptions] : []), file, edit, view, help];
}

/** The run a window shows (its #/run/ID route), or null. */
export function runIdOfUrl(url: string): string | null {
  const hash = url.includes('#') ? url.slice(url.indexOf('#') + 1) : '';
  const m = /^\/run\/([^/?#]+)$/.exec(hash);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return null;
  }
}
