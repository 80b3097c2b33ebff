// Numbers as a person reads them, and the change against the previous period.

export const METRICS = [
  { key: 'unique_visitors', label: 'Unique visitors', kind: 'count', lowerIsBetter: false },
  { key: 'total_sessions', label: 'Sessions', kind: 'count', lowerIsBetter: false },
  { key: 'total_screen_views', label: 'Pageviews', kind: 'count', lowerIsBetter: false },
  { key: 'views_per_session', label: 'Views per session', kind: 'ratio', lowerIsBetter: false },
  { key: 'bounce_rate', label: 'Bounce rate', kind: 'percent', lowerIsBetter: true },
  { key: 'avg_session_duration', label: 'Session duration', kind: 'duration', lowerIsBetter: false },
] as const;

export type MetricKey = (typeof METRICS)[number]['key'];
export type Metrics = Record<MetricKey, number>;

export const isMetric = (k: string): k is MetricKey => METRICS.some((m) => m.key === k);
export const metricInfo = (k: MetricKey) => METRICS.find((m) => m.key === k)!;

/** 950, 1.2k, 12k, 1.2M: compact for cards and rows. */
export function compact(n: number): string {
  const abs = Math.abs(n);
  if (abs < 1000) return Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/\.?0+$/, '');
  const units: [number, string][] = [[1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
  for (const [size, unit] of units) {
    if (abs >= size) {
      const v = n / size;
      return `${Math.abs(v) >= 100 ? Math.round(v) : v.toFixed(1).replace(/\.0$/, '')}${unit}`;
    }
  }
  return String(n);
}

/** Seconds as "42s", "3m 05s", "1h 02m". */
export function duration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export function formatMetric(key: MetricKey, v: number): string {
  switch (metricInfo(key).kind) {
    case 'percent': return `${Math.round(v * 10) / 10}%`;
    case 'duration': return duration(v);
    case 'ratio': return (Math.round(v * 100) / 100).toFixed(2).replace(/\.?0+$/, '') || '0';
    default: return compact(v);
  }
}

/** Full number for screen readers and tooltips (1,234). */
export function exact(key: MetricKey, v: number): string {
  const kind = metricInfo(key).kind;
  if (kind === 'count') return v.toLocaleString('en-US');
  return formatMetric(key, v);
}

interface Change {
  /** "+12%", "−3%", "0%", or "—" when there is nothing to compare with. */
  text: string;
  direction: 'up' | 'down' | 'flat' | 'none';
  /** Whether the change is good news (bounce rate: lower is better). */
  good: boolean | null;
  /** For screen readers: "up 12% from 100". */
  spoken: string;
}

export function change(key: MetricKey, current: number, previous: number | null): Change {
  if (previous === null || !Number.isFinite(previous)) return { text: '—', direction: 'none', good: null, spoken: 'no previous period to compare with' };
  if (previous === 0) {
    if (current === 0) return { text: '0%', direction: 'flat', good: null, spoken: 'unchanged from 0' };
    return { text: 'new', direction: 'up', good: !metricInfo(key).lowerIsBetter, spoken: 'up from 0' };
  }
  const pct = Math.round(((current - previous) / previous) * 100);
  const was = exact(key, previous);
  if (pct === 0) return { text: '0%', direction: 'flat', good: null, spoken: `about the same as ${was}` };
  const up = pct > 0;
  return {
    text: `${up ? '+' : '−'}${Math.abs(pct)}%`,
    direction: up ? 'up' : 'down',
    good: up !== metricInfo(key).lowerIsBetter,
    spoken: `${up ? 'up' : 'down'} ${Math.abs(pct)}% from ${was}`,
  };
}
