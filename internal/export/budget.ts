// Bounded work per export request: how many chart points and how many bytes one answer may
// hold, checked before any query from what the request asks for (series × buckets ×
// breakdown limit) and again on what the queries return, so a 1 KB request can never make
// the process build a response of hundreds of megabytes. Over the budget: a 400 that names
// it and says what to narrow. Pure; charts.ts and events.ts call it.
import { BadRequestError } from '../http/errors';

/** Data points of one chart answer (previous-period values count as points too). */
export const MAX_CHART_POINTS = 200_000;
/** Bytes of one chart answer, or of one page of /export/events (JSON, estimated as it is built). */
export const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
/** NDJSON: a batch of rows is cut smaller once its lines pass this many bytes. */
export const NDJSON_BATCH_BYTES = 4 * 1024 * 1024;

/** Bytes of a chart point as JSON: {"date":"2026-11-25T13:00:00.000Z","count":123456.78}, with previous about twice that. */
const POINT_BYTES = 60;
const PREVIOUS_POINT_BYTES = 70;

class BudgetExceededError extends BadRequestError {
  constructor(path: string, message: string) {
    super(`${path}: ${message}`, [{ path: [path], message }]);
  }
}

interface ChartShape {
  series: number;
  buckets: number;
  /** Breakdowns asked for (0: one series per item). */
  breakdowns: number;
  /** Breakdown value combinations per item (the request's `limit`). */
  limit: number;
  previous: boolean;
}

/** The most points the chart can have, from the request alone. */
function chartPointsUpperBound(shape: ChartShape): number {
  const perItem = shape.breakdowns > 0 ? shape.limit : 1;
  return shape.series * perItem * shape.buckets * (shape.previous ? 2 : 1);
}

/** Throws a 400 naming the budget when the request could make more points than MAX_CHART_POINTS. */
export function checkChartShape(shape: ChartShape, maxPoints = MAX_CHART_POINTS): void {
  const bound = chartPointsUpperBound(shape);
  if (bound <= maxPoints) return;
  const factors = [`${shape.series} series`, `${shape.buckets} buckets`];
  if (shape.breakdowns > 0) factors.push(`limit ${shape.limit} breakdown values`);
  if (shape.previous) factors.push('2 periods (previous)');
  const message = `the chart could hold ${bound} data points (${factors.join(' × ')}), over the budget of ${maxPoints} per request; `
    + (shape.breakdowns > 0 ? 'lower limit, ' : '') + 'use a coarser interval, a shorter period or fewer series';
  throw new BudgetExceededError(shape.breakdowns > 0 ? 'limit' : 'interval', message);
}

/** What one answer has used so far; each add throws once a budget is passed. */
export class ResponseBudget {
  private points = 0;
  private bytes = 0;

  constructor(
    private readonly what: 'chart' | 'page',
    private readonly maxPoints = MAX_CHART_POINTS,
    private readonly maxBytes = MAX_RESPONSE_BYTES,
  ) {}

  /** Rows a query returned: they are points (and the text they carry) before anything is built. */
  addRows(rows: number, textBytes: number): void {
    if (rows > this.maxPoints) {
      throw new BudgetExceededError('limit', `the ${this.what} query returned ${rows} rows, over the budget of ${this.maxPoints} data points per request; narrow the request`);
    }
    if (this.bytes + textBytes > this.maxBytes) this.overBytes(this.bytes + textBytes);
  }

  /** One chart series: its points and the bytes of its breakdown values (repeated in id, names and event.breakdowns). */
  addSeries(points: number, valueBytes: number, previous: boolean): void {
    this.points += points;
    this.bytes += points * (previous ? PREVIOUS_POINT_BYTES : POINT_BYTES) + 3 * valueBytes + 200;
    if (this.points > this.maxPoints) {
      throw new BudgetExceededError('limit', `the chart holds more than ${this.maxPoints} data points, the budget per request; lower limit, use a coarser interval, a shorter period or fewer series`);
    }
    if (this.bytes > this.maxBytes) this.overBytes(this.bytes);
  }

  /** Bytes of what is being built (e.g. one exported event as JSON). */
  addBytes(n: number): void {
    this.bytes += n;
    if (this.bytes > this.maxBytes) this.overBytes(this.bytes);
  }

  private overBytes(bytes: number): never {
    const narrow = this.what === 'chart'
      ? 'lower limit, break down by a property with shorter values, or ask for fewer series'
      : 'lower limit, leave out includes, or use format=ndjson (streamed)';
    throw new BudgetExceededError(this.what === 'chart' ? 'limit' : 'limit', `the ${this.what} would be larger than ${this.maxBytes} bytes (at least ${bytes}), the budget per request; ${narrow}`);
  }
}

/** UTF-8 bytes of the strings in `values` (other values count 0). */
export function textBytes(values: readonly unknown[]): number {
  let n = 0;
  for (const v of values) if (typeof v === 'string') n += v.length < 64 ? v.length * 3 : Buffer.byteLength(v);
  return n;
}

/** Min and max in constant stack (Math.min(...values) overflows the stack past ~100k values). */
export function minMax(values: readonly number[]): { min: number; max: number } {
  if (values.length === 0) return { min: 0, max: 0 };
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}
