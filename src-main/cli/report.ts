// `shardwise report RUN_DIR --format html|pdf|trace|csv [--out FILE]`: a run folder exported as
// a self-contained HTML report, its PDF print, a Chrome Trace Event JSON of its spans, or its
// metrics as CSV. Written atomically; by default into the run folder (report.html, report.pdf,
// trace.json, metrics.csv). Prints the path written.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { metricsCsv } from '../reports/csv.js';
import { reportHtml } from '../reports/html.js';
import { htmlToPdf } from '../reports/pdf.js';
import { traceOf } from '../reports/trace.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { readRun } from '../runs/read-run.js';
import { CliError } from './errors.js';

const USAGE = 'usage: shardwise report RUN_DIR --format html|pdf|trace|csv [--out FILE]';
const FORMATS = { html: 'report.html', pdf: 'report.pdf', trace: 'trace.json', csv: 'metrics.csv' } as const;
type Format = keyof typeof FORMATS;

export async function reportCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: true,
      options: { format: { type: 'string' }, out: { type: 'string' } },
    });
  } catch (e) {
    throw new CliError(`${(e as Error).message.split('\n')[0]}; ${USAGE}`);
  }
  const [dir, ...extra] = parsed.positionals;
  if (!dir) throw new CliError(`report needs the run folder; ${USAGE}`);
  if (extra.length) throw new CliError(`report takes one run folder, got also ${extra.join(' ')}; ${USAGE}`);
  const format = parsed.values.format;
  if (!format) throw new CliError(`--format is required (html, pdf, trace or csv); ${USAGE}`);
  if (!(format in FORMATS)) throw new CliError(`unknown --format "${format}"; use html, pdf, trace or csv`);
  let run;
  try {
    run = readRun(dir);
  } catch (e) {
    throw new CliError((e as Error).message, 1);
  }
  const out = path.resolve(parsed.values.out ?? path.join(dir, FORMATS[format as Format]));
  let data: string | Uint8Array;
  switch (format as Format) {
    case 'trace': {
      const trace = traceOf(run);
      if (run.spans.length === 0)
        process.stderr.write(`shardwise: note: ${dir} holds no spans (single-device runs record none): the trace is empty\n`);
      data = `${JSON.stringify(trace)}\n`;
      break;
    }
    case 'csv':
      data = metricsCsv(run);
      break;
    case 'html':
      data = reportHtml(run);
      break;
    case 'pdf':
      data = await htmlToPdf(reportHtml(run));
      break;
  }
  try {
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileAtomic(out, data);
  } catch (e) {
    throw new CliError(`cannot write ${out}: ${(e as Error).message}; choose another --out`, 1);
  }
  process.stdout.write(`${out}\n`);
  return 0;
}
