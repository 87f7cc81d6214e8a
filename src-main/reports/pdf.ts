// The HTML report printed to PDF by headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; never a downloaded browser). A4 landscape, backgrounds printed. The page is
// loaded with every network request aborted: the report must not need one. Before printing, the
// page redraws its charts as SVG (their text stays text in the PDF) without zoom sliders and no
// taller than a page (html.ts, shardwisePrintCharts).
import { existsSync } from 'node:fs';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];

/** A PDF export this machine cannot do (no Chromium, no playwright-core): what is missing and how to get it. */
export class PdfExportError extends Error {
  override name = 'PdfExportError';
}

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** The Chromium to print with: $SHARDWISE_CHROMIUM, else the first of the usual paths that exists. */
export function findChromium(): string {
  const env = process.env.SHARDWISE_CHROMIUM;
  if (env) {
    if (!existsSync(env))
      throw new PdfExportError(`SHARDWISE_CHROMIUM=${env} does not exist; point it at a Chromium or Chrome binary, or unset it`);
    return env;
  }
  const found = CANDIDATES.find((p) => existsSync(p));
  if (!found)
    throw new PdfExportError(
      `PDF export needs Chromium and none was found (${CANDIDATES.join(', ')}); install it (Debian: apt-get install chromium) or set SHARDWISE_CHROMIUM=/path/to/chromium`,
    );
  return found;
}

/** A4 landscape at 96 dpi minus 10 mm margins: the width charts are laid out at before printing. */
export const PRINT_VIEWPORT = { width: 1047, height: 718 };

/** The page's paper: A4 landscape with 10 mm margins, backgrounds printed. */
export const PDF_OPTIONS = {
  format: 'A4',
  landscape: true,
  printBackground: true,
  margin: { top: '10mm', bottom: '10mm', left: '10mm', right: '10mm' },
} as const;

/** Loads the report into `page` (sized PRINT_VIEWPORT) as it is printed: charts drawn, print media, charts as SVG without zoom sliders. */
export async function loadForPrint(page: import('playwright-core').Page, html: string): Promise<void> {
  await page.route('**/*', (route) => route.abort());
  await page.setContent(html, { waitUntil: 'load' });
  // strings: src-main has no DOM types
  await page.waitForFunction("document.documentElement.hasAttribute('data-charts-ready')", undefined, { timeout: 30_000 });
  await page.emulateMedia({ media: 'print' });
  await page.evaluate('window.shardwisePrintCharts ? window.shardwisePrintCharts() : 0');
}

export async function htmlToPdf(html: string): Promise<Uint8Array> {
  const executablePath = findChromium();
  let chromium: typeof import('playwright-core').chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch {
    throw new PdfExportError(
      "PDF export needs the 'playwright-core' package (it drives Chromium); install it next to shardwise (npm i playwright-core)",
    );
  }
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage({ viewport: PRINT_VIEWPORT });
    await loadForPrint(page, html);
    return await page.pdf(PDF_OPTIONS);
  } finally {
    await browser.close();
  }
}
