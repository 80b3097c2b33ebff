// Instants as a person reads them, in the project's timezone (the API sends ISO 8601 UTC).

const formats = new Map<string, Intl.DateTimeFormat>();
function format(timeZone: string, kind: 'dateTime' | 'time' | 'day'): Intl.DateTimeFormat {
  const key = `${kind} ${timeZone}`;
  let f = formats.get(key);
  if (!f) {
    const options: Intl.DateTimeFormatOptions = kind === 'day'
      ? { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }
      : kind === 'time'
        ? { timeZone, hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }
        : { timeZone, day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' };
    // en-CA writes a date as YYYY-MM-DD; en-GB as "24 Nov 2026, 14:05".
    f = new Intl.DateTimeFormat(kind === 'day' ? 'en-CA' : 'en-GB', options);
    formats.set(key, f);
  }
  return f;
}

/** "24 Nov 2026, 14:05" in the timezone. */
export const dateTime = (iso: string, timeZone: string): string => format(timeZone, 'dateTime').format(new Date(iso));

/** "14:05:09" in the timezone. */
export const timeOfDay = (iso: string, timeZone: string): string => format(timeZone, 'time').format(new Date(iso));

/** The local day (YYYY-MM-DD) of an instant in the timezone. */
export const localDay = (iso: string, timeZone: string): string => format(timeZone, 'day').format(new Date(iso));

/** Milliseconds after a start as "+0:05", "+12:40", "+1:02:03". */
export function offset(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const two = (n: number) => String(n).padStart(2, '0');
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `+${h}:${two(m)}:${two(s % 60)}` : `+${m}:${two(s % 60)}`;
}

/** "just now", "5 min ago", "3 h ago", "2 days ago". */
export function ago(iso: string, now: number = Date.now()): string {
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  const days = Math.floor(s / 86_400);
  return `${days} day${days === 1 ? '' : 's'} ago`;
}
