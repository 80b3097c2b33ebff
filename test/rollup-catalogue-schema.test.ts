// The declared rollup catalogue (internal/store/rollup-catalogue.ts) against a migrated
// database, both ways: every column of a catalogued table is one of its declared keys or
// measures and every declared one is a column; the primary key, where the table has one, is
// the declared keys; the dimension lists the migrations and SQL functions were written from
// (rollup_dimensions, events_rollup_dimensions, the pair helpers) are the catalogue's; every
// table the read planner reads is kept and catalogued.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestEnv } from './support/harness';
import { DIMENSION_PREFIX, SESSION_DIMENSIONS } from '../internal/model/event';
import {
  BOOKKEEPING, CUBE_DIMENSIONS, EVENT_ROLLUP_DIMENSIONS, measuresOf, ROLLUP_CATALOGUE, WIDE_DIMENSIONS,
} from '../internal/store/rollup-catalogue';
import { READ_CATALOGUE } from '../internal/query/planner';
import { UNREAD_SESSION_COLUMNS } from '../internal/store/rollup-deltas';

const env = new TestEnv('rollupschema');
before(() => env.setup());
after(() => env.teardown());

const sorted = (xs: Iterable<string>) => [...xs].sort();

async function columnsOf(relation: string): Promise<string[] | null> {
  const r = await env.db.query<{ col: string }>(
    `SELECT a.attname AS col FROM pg_attribute a
      WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, [`public.${relation}`]);
  return r.rows.length ? r.rows.map((x) => x.col) : null;
}

async function primaryKeyOf(relation: string): Promise<string[]> {
  const r = await env.db.query<{ col: string }>(
    `SELECT a.attname AS col FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) AS k(attnum)
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
      WHERE i.indrelid = to_regclass($1) AND i.indisprimary`, [`public.${relation}`]);
  return r.rows.map((x) => x.col);
}

test('each catalogued table has exactly the declared keys and measures as columns, and its primary key is the keys', async () => {
  const hll = (await env.db.query("SELECT 1 FROM pg_extension WHERE extname = 'hll'")).rowCount === 1;
  let checked = 0;
  for (const e of ROLLUP_CATALOGUE) {
    const cols = await columnsOf(e.relation);
    if (cols === null) {
      // Only the sketch tables may be missing, and only without the extension.
      assert.ok(e.unions?.length && !hll, `${e.relation} is catalogued but not in the migrated database`);
      continue;
    }
    checked++;
    const declared = [...e.keys, ...measuresOf(e)];
    assert.equal(new Set(declared).size, declared.length, `${e.relation}: a column is declared twice`);
    assert.deepEqual(sorted(cols), sorted(declared), `${e.relation}: columns against the catalogue's keys and measures`);
    const pk = await primaryKeyOf(e.relation);
    if (pk.length) assert.deepEqual(sorted(pk), sorted(e.keys), `${e.relation}: primary key against the catalogue's keys`);
  }
  assert.ok(checked >= ROLLUP_CATALOGUE.length - (hll ? 0 : 6), `checked ${checked} tables`);
});

test('every table the service keeps is catalogued, and every catalogued one is kept', async () => {
  const kept = (await env.db.query<{ relation: string }>(
    'SELECT relation FROM rollup_registry WHERE refresh_fn IS NOT NULL')).rows.map((r) => r.relation);
  const catalogued = new Set(ROLLUP_CATALOGUE.map((e) => e.relation));
  assert.deepEqual(kept.filter((r) => !catalogued.has(r) && !BOOKKEEPING.has(r)), []);
  const keptSet = new Set(kept);
  const hll = (await env.db.query("SELECT 1 FROM pg_extension WHERE extname = 'hll'")).rowCount === 1;
  for (const e of ROLLUP_CATALOGUE) {
    if (e.unions?.length && !hll) continue;
    assert.ok(keptSet.has(e.relation), `${e.relation} is catalogued but no refresh function keeps it`);
  }
});

test("the migrations' dimension lists and the SQL pair helpers are the catalogue's", async () => {
  const sessionDims = (await env.db.query<{ dimension: string; relation: string; parent: string | null }>(
    'SELECT dimension, relation, parent FROM rollup_dimensions ORDER BY dimension')).rows;
  assert.deepEqual(sessionDims.map((r) => r.dimension), sorted(SESSION_DIMENSIONS));
  for (const r of sessionDims) {
    assert.equal(r.relation, `rollup_${r.dimension}_hourly`);
    assert.equal(r.parent ?? undefined, DIMENSION_PREFIX[r.dimension as keyof typeof DIMENSION_PREFIX], r.dimension);
  }
  const eventDims = (await env.db.query<{ dimension: string; relation: string }>(
    'SELECT dimension, relation FROM events_rollup_dimensions ORDER BY dimension')).rows;
  assert.deepEqual(eventDims.map((r) => r.dimension), sorted(EVENT_ROLLUP_DIMENSIONS));
  for (const r of eventDims) assert.equal(r.relation, `events_${r.dimension}_hourly`);

  // tm_cube_pair_values: every pair of cube dimensions once, in the catalogue's order.
  const cube = (await env.db.query<{ v: string }>("SELECT tm_cube_pair_values('h') AS v")).rows[0]!.v;
  const cubePairs = [...cube.matchAll(/\('([a-z_]+),([a-z_]+)'/g)].map((m) => `${m[1]},${m[2]}`);
  const expectedCube = CUBE_DIMENSIONS.flatMap((a, i) => CUBE_DIMENSIONS.slice(i + 1).map((b) => `${a},${b}`));
  assert.deepEqual(cubePairs, expectedCube);
  // tm_dim_pair_values: each wide dimension with each cube dimension.
  const dims = (await env.db.query<{ v: string }>("SELECT tm_dim_pair_values('s') AS v")).rows[0]!.v;
  const dimPairs = new Set([...dims.matchAll(/\('([a-z_]+),([a-z_]+)'/g)].map((m) => `${m[1]},${m[2]}`));
  assert.deepEqual(sorted(dimPairs), sorted(WIDE_DIMENSIONS.flatMap((w) => CUBE_DIMENSIONS.map((c) => `${w},${c}`))));
  // The grouping sets the refresh functions build the pair layers with: the same pairs.
  const grouped = async (sql: string) => {
    const g = (await env.db.query<{ pair: string; sets: string }>(sql)).rows[0]!;
    return { pairs: [...g.pair.matchAll(/THEN '([a-z_]+),([a-z_]+)'/g)].map((m) => `${m[1]},${m[2]}`), sets: g.sets.split('), (').length };
  };
  const cubeGrouping = await grouped("SELECT pair, sets FROM tm_cube_pair_grouping('h', ARRAY['name'])");
  assert.deepEqual(cubeGrouping, { pairs: expectedCube, sets: expectedCube.length });
  const dimGrouping = await grouped("SELECT pair, sets FROM tm_dim_pair_grouping('s')");
  assert.deepEqual(dimGrouping.pairs, WIDE_DIMENSIONS.flatMap((w) => CUBE_DIMENSIONS.map((c) => `${w},${c}`)));
  assert.equal(dimGrouping.sets, dimGrouping.pairs.length);
});

test('every table the read planner reads is a catalogued rollup or its list of built days', () => {
  const known = new Set([...ROLLUP_CATALOGUE.map((e) => e.relation), ...BOOKKEEPING]);
  const read = new Set<string>();
  for (const s of READ_CATALOGUE) {
    const t = s.tables;
    for (const rel of [t.days, t.daily?.table, t.pairs?.table, t.hourly === 'raw' ? undefined : t.hourly.table,
      t.uncharted?.days, t.uncharted?.daily.table, t.uncharted?.hourly.table, t.visitors?.table]) {
      if (rel) read.add(rel);
    }
  }
  assert.ok(read.size > 40, `${read.size} tables read`);
  assert.deepEqual([...read].filter((r) => !known.has(r)).sort(), []);
});

test('no rollup function reads the session columns a delta may ignore (its end, its update time)', async () => {
  // A delta leaves out a session whose row changed only in these (rollup-deltas.ts): that is
  // exact only while no function computing a rollup reads them.
  const fns = (await env.db.query<{ name: string; src: string }>(
    `SELECT proname AS name, prosrc AS src FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'tm\\_%'`)).rows;
  const kept = (await env.db.query<{ fn: string }>('SELECT DISTINCT refresh_fn AS fn FROM rollup_registry WHERE refresh_fn IS NOT NULL')).rows;
  for (const k of kept) assert.ok(fns.some((f) => f.name === k.fn), `${k.fn} is a function of the database`);
  const word = new RegExp(`\\b(${UNREAD_SESSION_COLUMNS.join('|')})\\b`);
  assert.deepEqual(fns.filter((f) => word.test(f.src)).map((f) => f.name), []);
});
