// Periods as the API names them (semantics.md "Dates") and the previous period each is
// compared with. Calendar dates are YYYY-MM-DD in the project's timezone; arithmetic on them
// is done on UTC midnights, which have no daylight-saving gaps.

export const RANGES = [
  { value: '30min', label: 'Last 30 minutes' },
  { value: 'lastHour', label: 'Last hour' },
  { value: 'last24h', label: 'Last 24 hours' },
  { value: 'today', label: 'Today' },
  { value: 'yesterday', label: 'Yesterday' },
  { value: '7d', label: 'Last 7 days' },
  { value: '30d', label: 'Last 30 days' },
  { value: '3m', label: 'Last 3 months' },
  { value: '6m', label: 'Last 6 months' },
  { value: '12m', label: 'Last 12 months' },
  { value: 'monthToDate', label: 'Month to date' },
  { value: 'lastMonth', label: 'Last month' },
  { value: 'yearToDate', label: 'Year to date' },
  { value: 'lastYear', label: 'Last year' },
] as const;

type RangeValue = (typeof RANGES)[number]['value'];

export const isRange = (v: string): v is RangeValue => RANGES.some((r) => r.value === v);

/** A period the API understands: a named range, or custom dates (both inclusive). */
export type Period = { range: RangeValue } | { startDate: string; endDate: string };

const DATE = /^\d{4}-\d{2}-\d{2}$/;

export function isDate(s: string): boolean {
  if (!DATE.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

/** Today's date in a timezone, as YYYY-MM-DD. */
export function todayIn(timeZone: string, now = new Date()): string {
  // en-CA formats as YYYY-MM-DD.
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(now);
}

const toUtc = (d: string) => new Date(`${d}T00:00:00Z`);
const fmt = (d: Date) => d.toISOString().slice(0, 10);

function addDays(d: string, n: number): string {
  const x = toUtc(d);
  x.setUTCDate(x.getUTCDate() + n);
  return fmt(x);
}

/** First day of the month `n` months from d's month. */
function monthStart(d: string, n = 0): string {
  const x = toUtc(d);
  return fmt(new Date(Date.UTC(x.getUTCFullYear(), x.getUTCMonth() + n, 1)));
}

const monthEnd = (d: string, n = 0): string => addDays(monthStart(d, n + 1), -1);

function daysBetween(a: string, b: string): number {
  return Math.round((toUtc(b).getTime() - toUtc(a).getTime()) / 86_400_000);
}

/** The dates a named day-based range covers on `today`; null for the sub-day ones. */
export function datesOf(p: Period, today: string): { startDate: string; endDate: string } | null {
  if ('startDate' in p) return p;
  switch (p.range) {
    case 'today': return { startDate: today, endDate: today };
    case 'yesterday': return { startDate: addDays(today, -1), endDate: addDays(today, -1) };
    case '7d': return { startDate: addDays(today, -6), endDate: today };
    case '30d': return { startDate: addDays(today, -29), endDate: today };
    case '3m': return { startDate: monthStart(today, -2), endDate: today };
    case '6m': return { startDate: monthStart(today, -5), endDate: today };
    case '12m': return { startDate: monthStart(today, -11), endDate: today };
    case 'monthToDate': return { startDate: monthStart(today), endDate: today };
    case 'lastMonth': return { startDate: monthStart(today, -1), endDate: monthEnd(today, -1) };
    case 'yearToDate': return { startDate: `${today.slice(0, 4)}-01-01`, endDate: today };
    case 'lastYear': {
      const y = String(Number(today.slice(0, 4)) - 1).padStart(4, '0');
      return { startDate: `${y}-01-01`, endDate: `${y}-12-31` };
    }
    default: return null;
  }
}

/**
 * The period the cards compare with: the same length just before, or the calendar unit
 * before (today → yesterday, last month → the month before, Nm → the N months before,
 * month/year to date → the same days of the month/year before). Null for the sub-day ranges:
 * the API's custom periods are whole days.
 */
export function previousOf(p: Period, today: string): { startDate: string; endDate: string } | null {
  const cur = datesOf(p, today);
  if (!cur) return null;
  if ('range' in p) {
    const months = { '3m': 3, '6m': 6, '12m': 12, lastMonth: 1 }[p.range as string];
    if (months) {
      const start = monthStart(cur.startDate, -months);
      return { startDate: start, endDate: addDays(cur.startDate, -1) };
    }
    if (p.range === 'monthToDate') {
      const start = monthStart(today, -1);
      const end = addDays(start, daysBetween(cur.startDate, cur.endDate));
      const last = monthEnd(today, -1);
      return { startDate: start, endDate: end > last ? last : end };
    }
    if (p.range === 'yearToDate' || p.range === 'lastYear') {
      const shift = (d: string) => {
        const y = String(Number(d.slice(0, 4)) - 1).padStart(4, '0');
        const md = d.slice(5) === '02-29' ? '02-28' : d.slice(5);
        return `${y}-${md}`;
      };
      return { startDate: shift(cur.startDate), endDate: shift(cur.endDate) };
    }
  }
  const days = daysBetween(cur.startDate, cur.endDate) + 1;
  return { startDate: addDays(cur.startDate, -days), endDate: addDays(cur.startDate, -1) };
}

/** Query parameters of a period. */
export function periodParams(p: Period): Record<string, string> {
  return 'range' in p ? { range: p.range } : { startDate: p.startDate, endDate: p.endDate };
}

export function periodLabel(p: Period): string {
  if ('range' in p) return RANGES.find((r) => r.value === p.range)?.label ?? p.range;
  return p.startDate === p.endDate ? p.startDate : `${p.startDate} – ${p.endDate}`;
}
