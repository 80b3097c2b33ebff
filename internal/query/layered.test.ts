// The one layered read (internal/query/layered.ts): which CTEs a span's layers give and what
// each leaves out. (The SQL's answers are checked against the raw path by the integration tests
// of insights and export, which read through it.)
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { edges, layerCtes, perRow, rawPerHour, unloggedRows, type Layers } from './layered';

const span: Layers = { project: '$1', from: '$2::timestamptz', to: '$3::timestamptz' };
const ctes = (sql: string) => [...sql.matchAll(/(\w+) AS MATERIALIZED \(/g)].map((m) => m[1]);
const flat = (sql: string) => sql.replace(/--[^\n]*\n/g, '').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')').trim();

describe('layerCtes', () => {
  it('no days, no hours: the log only, each hour once', () => {
    const sql = flat(layerCtes(span));
    assert.deepEqual(ctes(sql), ['inv']);
    assert.match(sql, /SELECT DISTINCT i\.bucket FROM rollup_invalidations i WHERE i\.project_id = \$1 AND i\.bucket >= \$2::timestamptz AND i\.bucket < \$3::timestamptz/);
  });

  it('more raw hours are merged with the log (UNION)', () => {
    const sql = flat(layerCtes({ ...span, alsoRaw: 'SELECT h.bucket FROM raw_hours h' }));
    assert.match(sql, /SELECT i\.bucket FROM rollup_invalidations i .* UNION SELECT h\.bucket FROM raw_hours h/);
  });

  it('days inside one bucket carry the bucket; the hourly layer leaves out the days and the log', () => {
    const sql = flat(layerCtes({ ...span, days: { table: 'x_days', starts: '$4::timestamptz[]' }, hours: { held: { lo: 'a', hi: 'b' } } }));
    assert.deepEqual(ctes(sql), ['inv', 'days', 'covered', 'held', 'hrs']);
    assert.match(sql, /SELECT width_bucket\(m\.bucket, \$4::timestamptz\[\]\) AS bucket, m\.bucket AS lo/);
    assert.match(sql, /FROM x_days m WHERE .* AND width_bucket\(m\.bucket, \$4::timestamptz\[\]\) = width_bucket\(/);
    assert.match(sql, /NOT EXISTS \(SELECT 1 FROM inv WHERE inv\.bucket >= m\.bucket/);
    assert.match(sql, /covered AS MATERIALIZED \(SELECT generate_series\(days\.lo, .* FROM days UNION ALL SELECT inv\.bucket FROM inv\)/);
    assert.match(sql, /held AS MATERIALIZED \(SELECT a AS lo, b AS hi\)/);
    assert.match(sql, /hrs AS MATERIALIZED \(SELECT g\.h FROM held CROSS JOIN LATERAL generate_series\(held\.lo, held\.hi, interval '1 hour'\) AS g\(h\) WHERE NOT EXISTS \(SELECT 1 FROM covered c WHERE c\.h = g\.h\)\)/);
  });

  it('an hourly layer that reads raw rows keeps the logged hours', () => {
    const sql = flat(layerCtes({ ...span, days: { table: 'x_days' }, hours: { series: true, logged: true } }));
    assert.doesNotMatch(sql, /width_bucket/);
    assert.match(sql, /covered AS MATERIALIZED \(SELECT generate_series\(days\.lo, days\.hi - interval '1 hour', interval '1 hour'\) AS h FROM days\)/);
    assert.match(sql, /FROM generate_series\(\$2::timestamptz, \$3::timestamptz - interval '1 hour', interval '1 hour'\) AS g\(h\)/);
  });

  it('listed hours: the hours with rows in an hourly table', () => {
    const sql = flat(layerCtes({ ...span, days: { table: 'x_days' }, hours: { listed: 'x_hourly' } }));
    assert.match(sql, /hrs AS MATERIALIZED \(SELECT DISTINCT r\.bucket AS h FROM x_hourly r WHERE r\.project_id = \$1 .* AND NOT EXISTS \(SELECT 1 FROM covered c WHERE c\.h = r\.bucket\)\)/);
  });
});

describe('parts', () => {
  it('per day or hour: LATERAL kept by OFFSET 0', () => {
    assert.equal(perRow('days', 'SELECT 1', 'r'), 'days CROSS JOIN LATERAL (SELECT 1 OFFSET 0) r');
    assert.equal(flat(rawPerHour('inv', '*', 'events s', 's.project_id = $1', 's.created_at', 'x')),
      "inv CROSS JOIN LATERAL (SELECT * FROM events s WHERE s.project_id = $1 AND s.created_at >= inv.bucket AND s.created_at < inv.bucket + interval '1 hour' OFFSET 0) x");
  });

  it('flat hourly rows leave out the logged hours; edges are the partial hours outside the span', () => {
    assert.match(flat(unloggedRows(span, 't', ['r.k = 1'])), /^t r WHERE r\.project_id = \$1 AND r\.bucket >= \$2::timestamptz AND r\.bucket < \$3::timestamptz AND r\.bucket NOT IN \(SELECT inv\.bucket FROM inv\) AND r\.k = 1$/);
    assert.deepEqual(edges(span, 'e.t', true, true), ['e.t < $2::timestamptz', 'e.t >= $3::timestamptz']);
    assert.deepEqual(edges(span, 'e.t', false, true), ['e.t >= $3::timestamptz']);
  });
});
