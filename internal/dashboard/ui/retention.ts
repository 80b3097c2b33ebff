// The retention view: the cohort grid of GET retention/cohort (the current week and the 12
// before it). One row per cohort (the week of its profiles' first event), the weighted average
// first; 13 columns, week 0..12 after the cohort's week; each cell the share of the cohort
// still active that many weeks or more later, shaded by it. The API's percentages are
// fractions (0..1); weeks a cohort has not reached yet are left blank.
import type { CohortRow } from './analytics-api';
import { h } from './dom';
import { todayIn } from './periods';
import type { ViewContext } from './view-context';

export const COLUMNS = 13;
export const AVERAGE_ROW = 'Weighted Average';

/** A fraction (0..1) as a whole percentage: 0.6667 -> "67%". */
export const percentText = (fraction: number): string => `${Math.round(fraction * 100)}%`;

/**
 * The cell's background for a fraction: the accent colour, more opaque the higher the share
 * (0: none), and a text colour that stays readable on it.
 */
export function shade(fraction: number): { background: string; color: string } {
  const f = Math.min(1, Math.max(0, fraction));
  if (f === 0) return { background: 'transparent', color: 'var(--muted)' };
  const alpha = Math.round((0.08 + 0.84 * f) * 100) / 100;
  return { background: `rgba(79, 70, 229, ${alpha})`, color: alpha >= 0.55 ? '#fff' : 'var(--text)' };
}

const dayMs = (d: string) => Date.parse(`${d}T00:00:00Z`);

/** Whole weeks from a cohort's Monday (YYYY-MM-DD) to today (YYYY-MM-DD): the columns it has reached. */
export function weeksReached(cohort: string, today: string): number {
  return Math.floor((dayMs(today) - dayMs(cohort)) / (7 * 86_400_000));
}

/**
 * Whether a cell has a number: a cohort row's week k when the cohort has reached it; the
 * average row's when some cohort has.
 */
export function reached(rows: readonly CohortRow[], row: CohortRow, k: number, today: string): boolean {
  if (row.cohort_interval !== AVERAGE_ROW) return weeksReached(row.cohort_interval, today) >= k;
  return rows.some((r) => r.cohort_interval !== AVERAGE_ROW && weeksReached(r.cohort_interval, today) >= k);
}

/** "24 Nov 2026" for a cohort's Monday. */
function weekLabel(d: string): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', day: 'numeric', month: 'short', year: 'numeric' }).format(new Date(dayMs(d)));
}

export async function loadRetention(host: HTMLElement, ctx: ViewContext): Promise<void> {
  host.replaceChildren(h('section', { class: 'box', 'aria-busy': 'true' }, h('div', { class: 'skeleton-row' }), h('div', { class: 'skeleton-row' })));
  const rows = await ctx.api.cohorts(ctx.signal);
  if (ctx.signal.aborted) return;
  const today = todayIn(ctx.project.timezone);
  const head = h('div', { class: 'box-head' },
    h('h2', { id: 'retention-title' }, 'Retention by weekly cohort'),
    h('span', { class: 'muted' }, 'Identified profiles, the current week and the 12 before it; weeks start on Monday'));
  if (!rows.length) {
    host.replaceChildren(h('section', { class: 'box' }, head, h('p', { class: 'empty' }, 'No identified profile was active in these weeks.')));
    return;
  }
  const columns = Array.from({ length: COLUMNS }, (_, k) => k);
  const table = h('table', { class: 'cohorts', id: 'cohort-grid', 'aria-labelledby': 'retention-title' },
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col', class: 'cohort-name' }, 'Cohort'), h('th', { scope: 'col', class: 'num' }, 'Profiles'),
      columns.map((k) => h('th', { scope: 'col', class: 'num' }, `Week ${k}`)))),
    h('tbody', {}, rows.map((row) => {
      const average = row.cohort_interval === AVERAGE_ROW;
      const label = average ? 'Weighted average' : weekLabel(row.cohort_interval);
      return h('tr', { class: average ? 'average' : '', 'data-cohort': row.cohort_interval, 'data-sum': String(row.sum) },
        h('th', { scope: 'row', class: 'cohort-name' }, label),
        h('td', { class: 'num' }, row.sum.toLocaleString('en-US')),
        columns.map((k) => {
          const fraction = row.percentages[k] ?? 0;
          const value = row.values[k] ?? 0;
          if (!reached(rows, row, k, today)) return h('td', { class: 'cell future', 'data-week': String(k), title: 'Not reached yet' }, '');
          const { background, color } = shade(fraction);
          return h('td', {
            class: 'cell', 'data-week': String(k), 'data-value': String(value), 'data-percentage': String(fraction),
            style: `background:${background};color:${color}`,
            title: `${label}, week ${k}: ${value.toLocaleString('en-US')} of ${row.sum.toLocaleString('en-US')} (${percentText(fraction)})`,
          }, percentText(fraction));
        }));
    })));
  host.replaceChildren(h('section', { class: 'box retention' }, head, h('div', { class: 'table-scroll' }, table),
    h('p', { class: 'muted small' }, 'A cell is the share of the cohort with an event that many weeks after its first week, or later.')));
}
