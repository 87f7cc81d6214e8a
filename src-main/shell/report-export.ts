// File > Export Report: the run the window shows, saved where the user picks (a native save
// dialog). HTML, trace and CSV come from the same code as `shardwise report`; PDF is the HTML
// report printed by Electron itself (webContents.printToPDF) in a hidden window of its own
// session, so it needs no Chromium besides Electron's. That window's session refuses every
// request but the report's own file: the report must open offline.
import { BrowserWindow, dialog, session } from 'electron';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ReportFormat } from './menu.js';

/** What the export needs from the controller's compiled code (loaded from dist/ by main.ts). */
export interface ReportSource {
  /** the run's folder (throws NotFound for an unknown run) */
  runDir(runId: string): string;
  /** the report file's content, as `shardwise report` makes it */
  exportReport(runDir: string, format: 'html' | 'trace' | 'csv'): Promise<string | Uint8Array>;
}

const FILES: Record<ReportFormat, { suffix: string; filter: Electron.FileFilter }> = {
  html: { suffix: 'report.html', filter: { name: 'HTML report', extensions: ['html'] } },
  pdf: { suffix: 'report.pdf', filter: { name: 'PDF', extensions: ['pdf'] } },
  trace: { suffix: 'trace.json', filter: { name: 'Trace Event JSON', extensions: ['json'] } },
  csv: { suffix: 'metrics.csv', filter: { name: 'CSV', extensions: ['csv'] } },
};

const REPORT_PARTITION = 'shardwise-report-print';

/** The HTML report as a PDF, printed by a hidden, sandboxed window once its charts are drawn. */
export async function printHtmlToPdf(html: string): Promise<Uint8Array> {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-pdf-'));
  const file = path.join(dir, 'report.html');
  writeFileSync(file, html);
  const ses = session.fromPartition(REPORT_PARTITION);
  const allowed = pathToFileURL(file).href;
  ses.webRequest.onBeforeRequest((details, callback) => callback({ cancel: details.url !== allowed }));
  const win = new BrowserWindow({
    show: false,
    width: 1047,
    height: 718,
    webPreferences: { partition: REPORT_PARTITION, sandbox: true, contextIsolation: true, nodeIntegration: false, javascript: true },
  });
  try {
    await win.loadFile(file);
    const deadline = Date.now() + 30_000;
    while (!(await win.webContents.executeJavaScript("document.documentElement.hasAttribute('data-charts-ready')", true))) {
      if (Date.now() > deadline) throw new Error('the report did not finish drawing its charts within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    return await win.webContents.printToPDF({ landscape: true, pageSize: 'A4', printBackground: true, margins: { marginType: 'default' } });
  } finally {
    win.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Ask where to save, make the file, write it. Resolves to the saved path, or null when cancelled. */
export async function exportRunReport(win: BrowserWindow, src: ReportSource, runId: string, format: ReportFormat): Promise<string | null> {
  const dir = src.runDir(runId);
  const f = FILES[format];
  const { canceled, filePath } = await dialog.showSaveDialog(win, {
    title: `Export ${runId}`,
    defaultPath: `${runId}-${f.suffix}`,
    filters: [f.filter],
  });
  if (canceled || !filePath) return null;
  const data = format === 'pdf' ? await printHtmlToPdf(String(await src.exportReport(dir, 'html'))) : await src.exportReport(dir, format);
  writeFileSync(filePath, data);
  return filePath;
}
