// The time-series chart (uPlot, MIT): the selected metric per bucket as the API gives them,
// the previous period as a dashed line, a tooltip with the values under the cursor, dates in
// the project's timezone. For screen readers the same numbers are a table beside it.
import uPlot from 'uplot';
import type { MetricKey } from './format';
import { exact, formatMetric, metricInfo } from './format';

type Bucket = 'hour' | 'day' | 'week' | 'month';

/** The bucket size, from the spacing of the series' dates (semantics.md: hour, day, week or month). */
export function bucketOf(dates: string[]): Bucket {
  if (dates.length < 2) return 'hour';
  const hours = (Date.parse(dates[1]!) - Date.parse(dates[0]!)) / 3_600_000;
  if (hours <= 2) return 'hour';
  if (hours <= 25) return 'day';
  if (hours <= 24 * 7 + 1) return 'week';
  return 'month';
}

export function bucketLabel(iso: string, bucket: Bucket, timeZone: string): string {
  const d = new Date(iso);
  const opts: Intl.DateTimeFormatOptions =
    bucket === 'hour' ? { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }
      : bucket === 'month' ? { month: 'long', year: 'numeric' }
        : { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric' };
  const text = new Intl.DateTimeFormat('en-GB', { ...opts, timeZone }).format(d);
  return bucket === 'week' ? `Week of ${text}` : text;
}

interface ChartData {
  metric: MetricKey;
  dates: string[];
  values: number[];
  /** The previous period's values, bucket by bucket (shorter or missing when it has fewer buckets). */
  previous: number[] | null;
  timeZone: string;
}

export class SeriesChart {
  private plot: uPlot | null = null;
  private readonly tooltip: HTMLDivElement;
  private readonly observer: ResizeObserver;
  private data: ChartData | null = null;

  constructor(private readonly host: HTMLElement) {
    this.tooltip = document.createElement('div');
    this.tooltip.className = 'chart-tip';
    this.tooltip.setAttribute('aria-hidden', 'true');
    this.observer = new ResizeObserver(() => {
      if (this.plot) this.plot.setSize(this.size());
    });
    this.observer.observe(host);
  }

  private size(): { width: number; height: number } {
    const width = Math.max(240, this.host.clientWidth);
    return { width, height: width < 560 ? 200 : 280 };
  }

  render(data: ChartData): void {
    this.data = data;
    this.plot?.destroy();
    this.host.replaceChildren();
    const bucket = bucketOf(data.dates);
    const xs = data.dates.map((d) => Date.parse(d) / 1000);
    const prev = data.previous ? xs.map((_, i) => data.previous![i] ?? null) : null;
    const info = metricInfo(data.metric);
    const tz = data.timeZone;
    const tickFormat = new Intl.DateTimeFormat('en-GB', bucket === 'hour'
      ? { hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone: tz }
      : bucket === 'month' ? { month: 'short', year: '2-digit', timeZone: tz } : { day: 'numeric', month: 'short', timeZone: tz });
    const opts: uPlot.Options = {
      ...this.size(),
      legend: { show: false },
      cursor: { y: false, points: { size: 9, fill: '#fff', width: 2 }, drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.12 : info.kind === 'percent' ? 100 : 1] } },
      axes: [
        {
          stroke: '#6b7280', grid: { show: false }, ticks: { show: false }, font: '12px system-ui, sans-serif', gap: 6,
          values: (_u, splits) => splits.map((s) => tickFormat.format(new Date(s * 1000))),
          // Ticks on bucket starts only (a day, week or month bucket gets one label), as many as fit.
          splits: (u) => {
            const fit = Math.max(2, Math.floor(u.bbox.width / devicePixelRatio / 72));
            const step = Math.max(1, Math.ceil(xs.length / fit));
            return xs.filter((_, i) => i % step === 0);
          },
        },
        {
          stroke: '#6b7280', grid: { stroke: '#eef0f4', width: 1 }, ticks: { show: false }, font: '12px system-ui, sans-serif', size: 56,
          values: (_u, splits) => splits.map((v) => formatMetric(data.metric, v)),
          space: 40,
          // Counts have whole ticks only.
          ...(info.kind === 'count' ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7] } : {}),
        },
      ],
      series: [
        {},
        {
          label: info.label, stroke: '#6366f1', width: 2.5,
          fill: (u) => {
            const g = u.ctx.createLinearGradient(0, u.bbox.top, 0, u.bbox.top + u.bbox.height);
            g.addColorStop(0, 'rgba(99,102,241,0.28)');
            g.addColorStop(1, 'rgba(99,102,241,0.02)');
            return g;
          },
          points: { show: xs.length <= 2 },
        },
        ...(prev ? [{ label: 'Previous period', stroke: '#a5b4fc', width: 1.5, dash: [6, 5], points: { show: false } } as uPlot.Series] : []),
      ],
      hooks: {
        setCursor: [(u) => this.moveTip(u, bucket)],
      },
    };
    const series: uPlot.AlignedData = prev ? [xs, data.values, prev] : [xs, data.values];
    this.plot = new uPlot(opts, series, this.host);
    this.plot.over.appendChild(this.tooltip);
    this.tooltip.style.display = 'none';
  }

  private moveTip(u: uPlot, bucket: Bucket): void {
    const i = u.cursor.idx;
    const d = this.data;
    if (i === null || i === undefined || !d || u.cursor.left === undefined || u.cursor.left < 0) {
      this.tooltip.style.display = 'none';
      return;
    }
    const value = d.values[i] ?? 0;
    const before = d.previous?.[i];
    this.tooltip.replaceChildren();
    const when = document.createElement('div');
    when.className = 'chart-tip-date';
    when.textContent = bucketLabel(d.dates[i]!, bucket, d.timeZone);
    const v = document.createElement('div');
    v.className = 'chart-tip-value';
    v.innerHTML = '<span class="dot"></span>';
    v.append(`${metricInfo(d.metric).label}: `);
    const b = document.createElement('b');
    b.textContent = exact(d.metric, value);
    v.append(b);
    this.tooltip.append(when, v);
    if (before !== undefined && before !== null) {
      const p = document.createElement('div');
      p.className = 'chart-tip-prev';
      p.textContent = `Previous period: ${exact(d.metric, before)}`;
      this.tooltip.append(p);
    }
    this.tooltip.style.display = 'block';
    const left = u.cursor.left;
    const width = this.tooltip.offsetWidth;
    const x = left + 14 + width > u.over.clientWidth ? left - width - 14 : left + 14;
    this.tooltip.style.transform = `translate(${Math.max(0, x)}px, 8px)`;
  }

  destroy(): void {
    this.observer.disconnect();
    this.plot?.destroy();
    this.plot = null;
  }
}
