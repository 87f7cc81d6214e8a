// Report downloads in web mode: serve's GET /api/reports/RUN/FORMAT with the token as Bearer,
// saved by the browser from a blob (the token never appears in a URL).
import { pageToken } from './api/connection';

export const REPORT_BUTTONS = [
  { format: 'html', label: 'HTML report' },
  { format: 'pdf', label: 'PDF' },
  { format: 'trace', label: 'Trace JSON' },
  { format: 'csv', label: 'Metrics CSV' },
] as const;
export type ReportFormat = (typeof REPORT_BUTTONS)[number]['format'];

export async function downloadReport(runId: string, format: ReportFormat): Promise<void> {
  const token = pageToken();
  if (!token) throw new Error('no serve token: open the URL that shardwise serve printed');
  const res = await fetch(`/api/reports/${encodeURIComponent(runId)}/${format}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`${format} export failed: ${(await res.text()).trim() || res.status}`);
  const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') ?? '')?.[1] ?? `${runId}.${format}`;
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
