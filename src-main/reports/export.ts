// One run folder as one report file: what `shardwise report` writes and the dashboard's
// export buttons download (src-main/serve/report-route.ts).
import { readRun } from '../runs/read-run.js';
import { metricsCsv } from './csv.js';
import { reportHtml } from './html.js';
import { htmlToPdf } from './pdf.js';
import { traceOf } from './trace.js';

export const REPORT_FORMATS = {
  html: { file: 'report.html', type: 'text/html; charset=utf-8' },
  pdf: { file: 'report.pdf', type: 'application/pdf' },
  trace: { file: 'trace.json', type: 'application/json' },
  csv: { file: 'metrics.csv', type: 'text/csv; charset=utf-8' },
} as const;
export type ReportFormat = keyof typeof REPORT_FORMATS;

export const isReportFormat = (f: string): f is ReportFormat => Object.prototype.hasOwnProperty.call(REPORT_FORMATS, f);

export async function exportReport(runDir: string, format: ReportFormat): Promise<string | Uint8Array> {
  const run = readRun(runDir);
  switch (format) {
    case 'trace':
      return `${JSON.stringify(traceOf(run))}\n`;
    case 'csv':
      return metricsCsv(run);
    case 'html':
      return reportHtml(run);
    case 'pdf':
      return htmlToPdf(reportHtml(run));
  }
}
