// Turns a range or a startDate/endDate pair into the instants of a period and its series
// buckets, with calendar boundaries taken in the project's IANA timezone (Intl only). The
// decisions (which instants each range covers, DST, granularity, bucket alignment) are
// docs/insights-decisions.md, "Decisions", and docs/semantics.md, "Dates" and `series`.
import type { Range } from './params';

export type Granularity = 'hour' | 'day' | 'week' | 'month';

export interface Period {
  /** First instant of the period (inclusive). */
  start: Date;
  /** End of the period (exclusive). */
  end: Date;
  timezone: string;
  granularity: Granularity;
  /** Start instants of the series buckets, ascending; the first is <= start. */
  buckets: Date[];
}

interface PeriodInput {
  range: Range;
  startDate?: string | undefined;
  endDate?: string | undefined;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A calendar date in some timezone (month 1..12). */
export interface LocalDate {
  year: number;
  month: number;
  day: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timezone: string): Intl.DateTimeFormat {
  let f = formatters.get(timezone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    formatters.set(timezone, f);
  }
  return f;
}

/** True when Intl knows the IANA timezone name. */
export function isValidTimeZone(timezone: string): boolean {
  try {
    formatterFor(timezone);
    return true;
  } catch {
    return false;
  }
}

/** The wall-clock time of `instantMs` in `timezone`, expressed as if it were UTC (ms). */
function wallClockMs(instantMs: number, timezone: string): number {
  const parts: Record<string, string> = {};
  for (const p of formatterFor(timezone).formatToParts(new Date(instantMs))) parts[p.type] = p.value;
  let year = Number(parts.year);
  if (parts.era === 'BC' || parts.era === 'B') year = 1 - year;
  const d = new Date(0);
  d.setUTCFullYear(year, Number(parts.month) - 1, Number(parts.day));
  d.setUTCHours(Number(parts.hour), Number(parts.minute), Number(parts.second), 0);
  // Intl drops milliseconds; keep them so the result is exact.
  const ms = ((instantMs % 1000) + 1000) % 1000;
  return d.getTime() + ms;
}

/** UTC offset of `timezone` at `instantMs`, in ms (local = utc + offset). */
function offsetMs(instantMs: number, timezone: string): number {
  return wallClockMs(instantMs, timezone) - instantMs;
}

/**
 * The instant at which the wall clock in `timezone` shows `wallMs`. An ambiguous time
 * (clocks turned back) gives the earlier instant; a skipped time (clocks turned forward)
 * gives the instant the same distance after the change, i.e. the first valid time at
 * or after it for a start of day.
 */
export function instantOfWallClock(wallMs: number, timezone: string): number {
  const before = offsetMs(wallMs - DAY, timezone);
  const after = offsetMs(wallMs + DAY, timezone);
  const candidates = [wallMs - before, wallMs - after]
    .filter((t) => offsetMs(t, timezone) === wallMs - t)
    .sort((a, b) => a - b);
  return candidates[0] ?? wallMs - before;
}

function wallOfDate(d: LocalDate): number {
  const x = new Date(0);
  x.setUTCFullYear(d.year, d.month - 1, d.day);
  return x.getTime();
}

function dateOfWall(wallMs: number): LocalDate {
  const x = new Date(wallMs);
  return { year: x.getUTCFullYear(), month: x.getUTCMonth() + 1, day: x.getUTCDate() };
}

export function parseLocalDate(s: string): LocalDate {
  const [year, month, day] = s.split('-').map(Number) as [number, number, number];
  return { year, month, day };
}

/** The local calendar date of an instant. */
export function localDateOf(instantMs: number, timezone: string): LocalDate {
  return dateOfWall(wallClockMs(instantMs, timezone));
}

export function addDays(d: LocalDate, days: number): LocalDate {
  return dateOfWall(wallOfDate(d) + days * DAY);
}

function addMonths(d: LocalDate, months: number): LocalDate {
  const index = d.year * 12 + (d.month - 1) + months;
  return { year: Math.floor(index / 12), month: (index % 12) + 1, day: 1 };
}

/** Days from `a` to `b` (b - a). */
export function daysBetween(a: LocalDate, b: LocalDate): number {
  return Math.round((wallOfDate(b) - wallOfDate(a)) / DAY);
}

/** First instant of the local date `d` in `timezone`. */
export function startOfDay(d: LocalDate, timezone: string): number {
  return instantOfWallClock(wallOfDate(d), timezone);
}

function monthStart(d: LocalDate): LocalDate {
  return { year: d.year, month: d.month, day: 1 };
}

function mondayOnOrBefore(d: LocalDate): LocalDate {
  const weekday = new Date(wallOfDate(d)).getUTCDay(); // 0 = Sunday
  return addDays(d, -((weekday + 6) % 7));
}

export function granularityFor(nominalMs: number): Granularity {
  if (nominalMs <= 2 * DAY) return 'hour';
  if (nominalMs <= 92 * DAY) return 'day';
  if (nominalMs <= 186 * DAY) return 'week';
  return 'month';
}

/** Calendar period [first, endExclusive) of local dates. */
interface DayPeriod {
  kind: 'days';
  first: LocalDate;
  endExclusive: LocalDate;
}
/** Sliding period [now - length, now]. */
interface SlidingPeriod {
  kind: 'sliding';
  lengthMs: number;
}

function periodShape(input: PeriodInput, today: LocalDate): DayPeriod | SlidingPeriod {
  if (input.startDate !== undefined && input.endDate !== undefined) {
    return { kind: 'days', first: parseLocalDate(input.startDate), endExclusive: addDays(parseLocalDate(input.endDate), 1) };
  }
  const tomorrow = addDays(today, 1);
  const thisMonth = monthStart(today);
  const days = (first: LocalDate, endExclusive: LocalDate): DayPeriod => ({ kind: 'days', first, endExclusive });
  switch (input.range) {
    case '30min': return { kind: 'sliding', lengthMs: 30 * MINUTE };
    case 'lastHour': return { kind: 'sliding', lengthMs: HOUR };
    case 'last24h': return { kind: 'sliding', lengthMs: DAY };
    case 'today': return days(today, tomorrow);
    case 'yesterday': return days(addDays(today, -1), today);
    case '7d': return days(addDays(today, -6), tomorrow);
    case '30d': return days(addDays(today, -29), tomorrow);
    case '90d': return days(addDays(today, -89), tomorrow);
    case '3m': return days(addMonths(thisMonth, -2), addMonths(thisMonth, 1));
    case '6m': return days(addMonths(thisMonth, -5), addMonths(thisMonth, 1));
    case '12m': return days(addMonths(thisMonth, -11), addMonths(thisMonth, 1));
    case 'monthToDate': return days(thisMonth, tomorrow);
    case 'lastMonth': return days(addMonths(thisMonth, -1), thisMonth);
    case 'yearToDate': return days({ year: today.year, month: 1, day: 1 }, tomorrow);
    case 'lastYear': return days({ year: today.year - 1, month: 1, day: 1 }, { year: today.year, month: 1, day: 1 });
  }
}

/** Bucket start instants covering [startMs, endMs), aligned in `timezone` (minutes: the charts' interval). */
export function bucketStarts(startMs: number, endMs: number, granularity: Granularity | 'minute', timezone: string): Date[] {
  const buckets: Date[] = [];
  if (granularity === 'hour' || granularity === 'minute') {
    // Local hours begin where the local minutes and seconds are zero; stepping one real
    // hour then gives 23 buckets on a spring-forward day and 25 on a fall-back day.
    const step = granularity === 'hour' ? HOUR : MINUTE;
    const wall = wallClockMs(startMs, timezone);
    const into = ((wall % step) + step) % step;
    for (let t = startMs - into; t < endMs; t += step) buckets.push(new Date(t));
    return buckets;
  }
  const firstDay = localDateOf(startMs, timezone);
  let date = granularity === 'day' ? firstDay : granularity === 'week' ? mondayOnOrBefore(firstDay) : monthStart(firstDay);
  for (;;) {
    const t = startOfDay(date, timezone);
    if (t >= endMs) break;
    buckets.push(new Date(t));
    date = granularity === 'month' ? addMonths(date, 1) : addDays(date, granularity === 'week' ? 7 : 1);
  }
  return buckets;
}

/**
 * Resolves the period of an insights query. `timezone` must be a valid IANA name (see
 * isValidTimeZone); `now` is the reference instant for ranges.
 */
export function resolvePeriod(input: PeriodInput, timezone: string, now: Date): Period {
  const nowMs = now.getTime();
  const shape = periodShape(input, localDateOf(nowMs, timezone));
  let startMs: number;
  let endMs: number;
  let nominalMs: number;
  if (shape.kind === 'sliding') {
    startMs = nowMs - shape.lengthMs;
    endMs = nowMs + 1; // now itself is inside the period
    nominalMs = shape.lengthMs;
  } else {
    startMs = startOfDay(shape.first, timezone);
    endMs = startOfDay(shape.endExclusive, timezone);
    nominalMs = daysBetween(shape.first, shape.endExclusive) * DAY;
  }
  const granularity = granularityFor(nominalMs);
  return {
    start: new Date(startMs),
    end: new Date(endMs),
    timezone,
    granularity,
    buckets: bucketStarts(startMs, endMs, granularity, timezone),
  };
}
