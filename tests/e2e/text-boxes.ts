// Text boxes for the browser tests' layout checks, one helper for all of them: the boxes of the
// text ECharts drew in a chart (read from its zrender display list, so it works with the canvas
// renderer the dashboard uses: each line of a text is a tspan there, transformed for rotated or
// marker labels, and clipped where a clip path hides part of it), the boxes of the DOM text under
// an element (one per line box of each text node), and the checks on them: which pairs overlap,
// which cross their bounds, which elements cut their text.
import type { Page } from 'playwright-core';

export interface Box {
  name: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Boxes that share more than `slack` px both ways (two lines that only touch do not overlap). */
export const overlap = (a: Box, b: Box, slack = 0) =>
  Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x) > slack &&
  Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y) > slack;

/** Every pair of boxes that overlaps, named. */
export function overlapping(boxes: readonly Box[], slack = 0): string[] {
  const out: string[] = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++)
      if (overlap(boxes[i]!, boxes[j]!, slack)) out.push(`"${boxes[i]!.name}" / "${boxes[j]!.name}"`);
  return out;
}

/** Every box that reaches more than `slack` px outside `bounds`, named with where it crosses. */
export function outside(boxes: readonly Box[], bounds: Omit<Box, 'name'>, slack = 0): string[] {
  const out: string[] = [];
  for (const b of boxes) {
    const sides = [
      b.x < bounds.x - slack ? 'left' : '',
      b.y < bounds.y - slack ? 'top' : '',
      b.x + b.width > bounds.x + bounds.width + slack ? 'right' : '',
      b.y + b.height > bounds.y + bounds.height + slack ? 'bottom' : '',
    ].filter(Boolean);
    if (sides.length) out.push(`"${b.name}" crosses the ${sides.join(', ')} edge`);
  }
  return out;
}

export interface ChartText {
  /** the chart's element, page coordinates */
  bounds: Omit<Box, 'name'>;
  /** every visible text line ECharts drew, page coordinates */
  boxes: Box[];
  /** texts a clip path cuts part of (a label half hidden by a zoomed grid or a scrolling legend) */
  clipped: string[];
}

/**
 * The text of one chart. `registry` is the global its instances are listed on by id: the
 * dashboard's `__shardwiseCharts` (EChart.vue) or the HTML report's `__shardwiseReportCharts`.
 * Texts a clip path hides whole (blocks outside a zoom window) are left out.
 */
export function chartText(page: Page, id: string, registry = '__shardwiseCharts'): Promise<ChartText> {
  return page.evaluate(
    ([chartId, reg]) => {
      type Chart = { getZr(): any; getDom(): HTMLElement };
      const chart = (window as unknown as Record<string, Record<string, Chart> | undefined>)[reg]?.[chartId];
      if (!chart) throw new Error(`no chart ${chartId} on window.${reg}`);
      const dom = chart.getDom().getBoundingClientRect();
      const boxes: Box[] = [];
      const clipped: string[] = [];
      for (const el of chart.getZr().storage.getDisplayList(true) as any[]) {
        const text = el.style?.text;
        if (el.type !== 'tspan' || el.ignore || el.invisible || !text || !String(text).trim()) continue;
        const r = el.getBoundingRect().clone();
        if (el.transform) r.applyTransform(el.transform);
        let cut = false;
        let hidden = false;
        for (const clip of (el.__clipPaths ?? []) as any[]) {
          const c = clip.getBoundingRect().clone();
          if (clip.transform) c.applyTransform(clip.transform);
          const w = Math.min(r.x + r.width, c.x + c.width) - Math.max(r.x, c.x);
          const h = Math.min(r.y + r.height, c.y + c.height) - Math.max(r.y, c.y);
          if (w <= 0 || h <= 0) hidden = true;
          else if (w < r.width - 1 || h < r.height - 1) cut = true;
        }
        if (hidden) continue;
        if (cut) clipped.push(String(text));
        boxes.push({ name: String(text), x: dom.x + r.x, y: dom.y + r.y, width: r.width, height: r.height });
      }
      return { bounds: { x: dom.x, y: dom.y, width: dom.width, height: dom.height }, boxes, clipped };
    },
    [id, registry] as const,
  );
}

/** What is wrong with the text a chart drew: overlapping lines, lines outside the chart, lines cut by a clip path. */
export async function chartTextProblems(page: Page, id: string, registry?: string): Promise<string[]> {
  const t = await chartText(page, id, registry);
  return [
    ...overlapping(t.boxes, 1).map((p) => `${id}: overlap ${p}`),
    ...outside(t.boxes, t.bounds, 1).map((p) => `${id}: ${p}`),
    ...t.clipped.map((c) => `${id}: "${c}" is cut by a clip path`),
  ];
}

/**
 * The DOM text under `selector` (every match), one box per line box of each visible text node,
 * and the elements there that cut their text (content wider or taller than the box that clips it,
 * or a line past the viewport's right edge).
 */
export function domText(page: Page, selector: string, exclude = '[data-chart-id], .chart'): Promise<{ boxes: Box[]; cut: string[] }> {
  return page.evaluate(
    ([sel, skip]) => {
      const boxes: Box[] = [];
      const cut: string[] = [];
      const label = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 60);
      for (const root of Array.from(document.querySelectorAll(sel))) {
        const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
          const text = n.textContent ?? '';
          if (!text.trim()) continue;
          const parent = n.parentElement!;
          if (parent.closest(skip)) continue; // a chart's own text (SVG) is checked by chartText
          const style = getComputedStyle(parent);
          if (style.visibility === 'hidden' || parent.closest('[hidden], details:not([open]) > :not(summary)')) continue;
          const range = document.createRange();
          range.selectNodeContents(n);
          for (const r of Array.from(range.getClientRects())) {
            if (r.width < 0.5 || r.height < 0.5) continue;
            boxes.push({ name: label(text), x: r.x, y: r.y, width: r.width, height: r.height });
            if (r.right > document.documentElement.clientWidth + 1) cut.push(`"${label(text)}" runs past the window's right edge`);
          }
        }
        for (const el of [root, ...Array.from(root.querySelectorAll('*'))] as HTMLElement[]) {
          const s = getComputedStyle(el);
          if (!el.textContent?.trim() || s.display === 'none') continue;
          const clipsX = s.overflowX !== 'visible';
          const clipsY = s.overflowY !== 'visible';
          // a scroll box is not a cut (its content scrolls): only hidden/clip and ellipsis hide text
          const hides = (o: string) => o === 'hidden' || o === 'clip';
          if (
            (clipsX && hides(s.overflowX) && el.scrollWidth > el.clientWidth + 1) ||
            (s.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1)
          )
            cut.push(`"${label(el.textContent)}" is cut at the right (${el.scrollWidth} px in ${el.clientWidth})`);
          if (clipsY && hides(s.overflowY) && el.scrollHeight > el.clientHeight + 1)
            cut.push(`"${label(el.textContent)}" is cut at the bottom (${el.scrollHeight} px in ${el.clientHeight})`);
        }
      }
      return { boxes, cut };
    },
    [selector, exclude] as const,
  );
}

/** How many lines the text of each element matching `selector` takes (distinct tops of its line boxes). */
export function linesOf(page: Page, selector: string): Promise<number[]> {
  return page.locator(selector).evaluateAll((els) =>
    els.map((el) => {
      const range = document.createRange();
      range.selectNodeContents(el);
      return new Set(
        Array.from(range.getClientRects())
          .filter((r) => r.width > 0.5)
          .map((r) => Math.round(r.top)),
      ).size;
    }),
  );
}

/** What is wrong with the DOM text under `selector`: lines of different text overlapping, text cut. */
export async function domTextProblems(page: Page, selector: string): Promise<string[]> {
  const { boxes, cut } = await domText(page, selector);
  return [...overlapping(boxes, 1).map((p) => `${selector}: overlap ${p}`), ...cut.map((c) => `${selector}: ${c}`)];
}
