// GET /api/reports/<runId>/<html|pdf|trace|csv>: a run's report file, made on request by the
// same code as `shardwise report`, for the dashboard's export buttons (it fetches with
// `Authorization: Bearer <token>` and saves the blob). Without the serve token: 401, nothing else.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, RUN_ID_RE } from '../../common/api/index.js';
import type { ControllerService } from '../controller/service.js';
import { exportReport, isReportFormat, REPORT_FORMATS } from '../reports/export.js';
import { tokenMatches } from './token.js';

export const REPORTS_PATH = '/api/reports/';

export async function serveReport(req: IncomingMessage, res: ServerResponse, service: ControllerService, token: string): Promise<void> {
  const text = (status: number, msg: string) =>
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' }).end(`${msg}\n`);
  const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  if (!tokenMatches(token, auth)) return void text(401, 'send the serve token: Authorization: Bearer <token>');
  if (req.method !== 'GET') return void text(405, 'GET only');
  const [runId = '', format = ''] = new URL(req.url ?? '/', 'http://x').pathname.slice(REPORTS_PATH.length).split('/');
  if (!RUN_ID_RE.test(runId)) return void text(400, `"${runId}" is not a run id`);
  if (!isReportFormat(format)) return void text(400, `unknown report format "${format}"; use html, pdf, trace or csv`);
  try {
    const dir = service.store.open(runId).dir;
    const data = await exportReport(dir, format);
    const f = REPORT_FORMATS[format];
    const name = `${runId}-${f.file}`;
    res.writeHead(200, {
      'Content-Type': f.type,
      'Content-Disposition': `attachment; filename="${name}"`,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    });
    res.end(typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  } catch (e) {
    if (e instanceof ApiError && e.name === 'NotFound') return void text(404, e.message);
    text(500, `report failed: ${(e as Error).message.split('\n')[0]}`);
  }
}
