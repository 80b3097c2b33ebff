// The rollup catalogue's own rules (no database: test/rollup-deltas.test.ts checks it against
// a migrated one).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BOOKKEEPING, catalogueEntry, isCatalogued, measuresOf, ROLLUP_CATALOGUE } from './rollup-catalogue';

test('each table is catalogued once, and no bookkeeping table is summed', () => {
  const names = ROLLUP_CATALOGUE.map((e) => e.relation);
  assert.equal(new Set(names).size, names.length);
  for (const n of names) assert.ok(!BOOKKEEPING.has(n), n);
});

test('a presence measure is one of the sums; a table without one holds only sketches', () => {
  for (const e of ROLLUP_CATALOGUE) {
    if (e.presence) assert.ok(e.sums.includes(e.presence), e.relation);
    else assert.ok(e.unions?.length && e.sums.length === 0, `${e.relation}: rows that can empty must name a presence`);
  }
});

test('daily tables name a bookkeeping days table (pages and day parts are whole UTC days)', () => {
  for (const e of ROLLUP_CATALOGUE.filter((x) => x.grain === 'day')) {
    if (e.days) assert.ok(BOOKKEEPING.has(e.days), `${e.relation} -> ${e.days}`);
    else assert.ok(['rollup_pages_daily', 'rollup_visitors_dayparts'].includes(e.relation), e.relation);
  }
  for (const e of ROLLUP_CATALOGUE.filter((x) => x.grain === 'hour')) assert.equal(e.days, undefined, e.relation);
});

test('the 18 session dimensions and 20 event columns have their hourly tables', () => {
  assert.equal(ROLLUP_CATALOGUE.filter((e) => /^rollup_.+_hourly$/.test(e.relation) && e.sums.includes('sessions')).length, 1 + 18 + 2); // totals, dimensions, cube, pages
  assert.equal(ROLLUP_CATALOGUE.filter((e) => /^events_.+_hourly$/.test(e.relation) && e.sums[0] === 'count').length, 20);
  assert.ok(catalogueEntry('events_hourly'));
  assert.ok(isCatalogued('rollup_city_hourly') && isCatalogued('event_cube_days') && !isCatalogued('sessions'));
  assert.deepEqual([...measuresOf(catalogueEntry('rollup_pages_hourly')!)].sort(),
    ['bounces', 'duration_ms', 'entries', 'sessions', 'timed_views', 'title', 'title_at', 'title_id', 'views']);
});

test('every entry is keyed by project and bucket, and no column is both a key and a measure', () => {
  for (const e of ROLLUP_CATALOGUE) {
    assert.ok(e.keys.includes('project_id') && e.keys.includes('bucket'), e.relation);
    const m = measuresOf(e);
    assert.deepEqual(e.keys.filter((k) => m.has(k)), [], e.relation);
    assert.equal(new Set(e.keys).size, e.keys.length, e.relation);
  }
});
