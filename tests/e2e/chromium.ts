// The browser the e2e tests drive: Debian's Chromium through playwright-core, with the flags
// the PDF export uses (src-main/reports/pdf.ts), so every browser test launches it one way.
import { chromium, type Browser } from 'playwright-core';
import { CHROMIUM_ARGS } from '../../src-main/reports/pdf.js';

export const CHROMIUM = '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}
