// Covering designs for the differential tests of the rollup SQL (internal/export): instead of
// the full cross product projects × periods × shapes × previous, every (period, shape) pair is
// asked once, the project and `previous` rotating so that every pair of two factors is still
// met. A bug that shows for one project (timezone) and one period, one project and one shape,
// one shape with or without the previous period, ... is still found; the cost is
// periods × shapes requests, not projects × periods × shapes × 2.
import assert from 'node:assert/strict';

export interface Cell<P, Q, S> {
  project: P;
  period: Q;
  shape: S;
  previous: boolean;
}

/**
 * Every (period i, shape j) once, for project (i + j) mod P (a Latin-square rotation: with at
 * least P periods and P shapes, every (project, period) and (project, shape) pair is met) and
 * previous = (i + floor(j / 2)) odd (a different rotation: with at least two periods and three
 * shapes, every (period, previous) and (shape, previous) pair is met, and not tied to the
 * project). `keep(i, j)` leaves pairs out where a file keeps only part of the matrix.
 * The design is checked (coveringPairs) before it is returned: a pair of two factors it misses
 * is an error, not a silently thinner test.
 */
export function coveringDesign<P, Q, S>(
  projects: readonly P[],
  periods: readonly Q[],
  shapes: readonly S[],
  keep: (i: number, j: number) => boolean = () => true,
): Cell<P, Q, S>[] {
  const out: Cell<P, Q, S>[] = [];
  periods.forEach((period, i) => {
    shapes.forEach((shape, j) => {
      if (!keep(i, j)) return;
      out.push({ project: projects[(i + j) % projects.length]!, period, shape, previous: (i + Math.floor(j / 2)) % 2 === 1 });
    });
  });
  assertCovering(out, projects, periods, shapes, keep);
  return out;
}

/**
 * Asserts `cells` meet every pair of two factors: (project, period), (project, shape),
 * (project, previous), (period, previous), (shape, previous), over the periods and shapes
 * `keep` asks for; and every kept (period, shape) pair.
 */
export function assertCovering<P, Q, S>(
  cells: readonly Cell<P, Q, S>[],
  projects: readonly P[],
  periods: readonly Q[],
  shapes: readonly S[],
  keep: (i: number, j: number) => boolean = () => true,
): void {
  const met = new Set(cells.map((c) => [projects.indexOf(c.project), periods.indexOf(c.period), shapes.indexOf(c.shape), c.previous ? 1 : 0].join()));
  const has = (pred: (p: number, i: number, j: number, prev: number) => boolean) =>
    [...met].some((k) => pred(...(k.split(',').map(Number) as [number, number, number, number])));
  const keptPeriods = periods.map((_, i) => i).filter((i) => shapes.some((_, j) => keep(i, j)));
  const keptShapes = shapes.map((_, j) => j).filter((j) => periods.some((_, i) => keep(i, j)));
  for (const i of keptPeriods) {
    for (const j of keptShapes) if (keep(i, j)) assert.ok(has((_, a, b) => a === i && b === j), `period ${i} × shape ${j}`);
  }
  projects.forEach((_, p) => {
    for (const i of keptPeriods) assert.ok(has((x, a) => x === p && a === i), `project ${p} × period ${i}`);
    for (const j of keptShapes) assert.ok(has((x, _a, b) => x === p && b === j), `project ${p} × shape ${j}`);
    for (const v of [0, 1]) assert.ok(has((x, _a, _b, w) => x === p && w === v), `project ${p} × previous ${v}`);
  });
  for (const v of [0, 1]) {
    for (const i of keptPeriods) assert.ok(has((_x, a, _b, w) => a === i && w === v), `period ${i} × previous ${v}`);
    for (const j of keptShapes) assert.ok(has((_x, _a, b, w) => b === j && w === v), `shape ${j} × previous ${v}`);
  }
}

/** The full cross product projects × periods × shapes × previous (where it is cheap: the upgrade tests' few requests). */
export function fullProduct<P, Q, S>(projects: readonly P[], periods: readonly Q[], shapes: readonly S[]): Cell<P, Q, S>[] {
  return projects.flatMap((project) => periods.flatMap((period) => shapes.flatMap((shape) => [false, true].map((previous) => ({ project, period, shape, previous })))));
}
