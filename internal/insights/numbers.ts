// Insights arithmetic (semantics.md, Insights numbers) as plain functions over counts.

/** numerator / denominator rounded half-up to 2 decimals; 0 when the denominator is 0. */
export function roundedRatio(numerator: number, denominator: number): number {
  if (denominator === 0) return 0;
  // Integers in, one division, one rounding: exact halves stay exact halves.
  return Math.round((numerator * 100) / denominator) / 100;
}

/** Bounced sessions / sessions x 100, 2 decimals. */
export function bounceRate(bounced: number, sessions: number): number {
  return roundedRatio(bounced * 100, sessions);
}

/** Mean of `count` durations summing to `totalMs`, in seconds, 2 decimals. */
export function meanSeconds(totalMs: number, count: number): number {
  return roundedRatio(totalMs, count * 1000);
}

/** pg returns bigint and numeric as strings; insights numbers are JSON numbers. */
export function toNumber(value: unknown): number {
  if (value === null || value === undefined) return 0;
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isFinite(n)) throw new TypeError(`not a number from the database: ${String(value)}`);
  return n;
}
