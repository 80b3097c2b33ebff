import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BadRequestError } from '../http/errors';
import { averageNonZero, previousMetric, round, seriesMetrics } from './charts';
import { resolveBound } from './events';
import {
  CHART_SEGMENTS,
  decodeCursor,
  encodeCursor,
  parseChartParams,
  parseEventsParams,
  parseTimeBound,
  type ExportCursor,
} from './params';

const q = (s: string) => new URLSearchParams(s);
const json = (v: unknown) => encodeURIComponent(JSON.stringify(v));

/** Asserts a 400 whose issues include one at `path`; returns the error. */
function rejects(parse: (q: URLSearchParams) => unknown, query: string, path: string[]): BadRequestError {
  try {
    parse(q(query));
  } catch (err) {
    assert.ok(err instanceof BadRequestError, `expected BadRequestError, got ${String(err)}`);
    assert.ok(
      err.issues.some((i) => JSON.stringify(i.path) === JSON.stringify(path)),
      `expected an issue at ${JSON.stringify(path)}, got ${JSON.stringify(err.issues)}`,
    );
    for (const i of err.issues) assert.ok(i.message.length > 0);
    return err;
  }
  assert.fail(`expected 400 for ?${query}`);
}

const cursor: ExportCursor = {
  query: '0123456789abcdef',
  anchor: { ts: '2026-03-10T12:00:00.123456Z', id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' },
  last: { ts: '2026-03-09T08:30:00.000001Z', id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c' },
  page: 3,
  total: 1234,
};

describe('export events params', () => {
  it('applies the defaults', () => {
    const p = parseEventsParams(q(''));
    assert.deepEqual(p, {
      projectId: undefined, events: [], profileId: undefined, start: undefined, end: undefined, page: undefined,
      limit: 50, includes: [], filters: [], cursor: undefined, format: 'json',
    });
  });

  it('reads projectId or project_id', () => {
    assert.equal(parseEventsParams(q('projectId=a')).projectId, 'a');
    assert.equal(parseEventsParams(q('project_id=b')).projectId, 'b');
    assert.equal(parseEventsParams(q('projectId=a&project_id=a')).projectId, 'a');
    rejects(parseEventsParams, 'projectId=a&project_id=b', ['project_id']);
  });

  it('event: repeated and comma-separated, deduplicated', () => {
    assert.deepEqual(parseEventsParams(q('event=a,b&event=c&event=a&event=')).events, ['a', 'b', 'c']);
  });

  it('includes: repeated and comma-separated; unknown is a 400', () => {
    assert.deepEqual(parseEventsParams(q('includes=profile,meta&includes=geo')).includes, ['profile', 'meta', 'geo']);
    rejects(parseEventsParams, 'includes=profile,nope', ['includes', '1']);
    // single event columns, by column or field name; a group name stays the group
    assert.deepEqual(parseEventsParams(q('includes=region,city,groups,os_version,osVersion,device,received_at')).includes, [
      { field: 'region' }, { field: 'city' }, { field: 'groups' }, { field: 'osVersion' }, { field: 'osVersion' }, 'device', { field: 'receivedAt' },
    ]);
    rejects(parseEventsParams, 'includes=region,session_id_x', ['includes', '1']);
  });

  it('page and limit', () => {
    const p = parseEventsParams(q('page=4&limit=1000'));
    assert.equal(p.page, 4);
    assert.equal(p.limit, 1000);
    rejects(parseEventsParams, 'limit=1001', ['limit']);
    rejects(parseEventsParams, 'limit=0', ['limit']);
    rejects(parseEventsParams, 'limit=ten', ['limit']);
    rejects(parseEventsParams, 'page=0', ['page']);
    rejects(parseEventsParams, 'page=-1', ['page']);
    rejects(parseEventsParams, 'page=1.5', ['page']);
    // A huge number is one issue (max), not also zod's safe-integer bound.
    for (const query of ['limit=99999999999999999999', 'page=99999999999999999999']) {
      assert.equal(rejects(parseEventsParams, query, [query.split('=')[0]!]).issues.length, 1, query);
    }
    assert.equal(rejects(parseChartParams, 'series=[{"name":"x"}]&limit=99999999999999999999', ['limit']).issues.length, 1);
  });

  it('start and end: dates and ISO date-times', () => {
    const p = parseEventsParams(q('start=2026-03-01&end=2026-03-02T10:00:00.5%2B02:00'));
    assert.deepEqual(p.start, { kind: 'date', text: '2026-03-01', date: '2026-03-01' });
    assert.equal(p.end?.kind, 'instant');
    rejects(parseEventsParams, 'start=2026-02-30', ['start']);
    rejects(parseEventsParams, 'start=yesterday', ['start']);
    rejects(parseEventsParams, 'end=2026-03-01T25:00:00Z', ['end']);
    rejects(parseEventsParams, 'start=2026-03-02&end=2026-03-01', ['end']);
  });

  it('filters as in insights', () => {
    const f = [{ name: 'properties.plan', operator: 'is', value: ['pro', 2] }];
    assert.deepEqual(parseEventsParams(q(`filters=${json(f)}`)).filters, [{ name: 'properties.plan', operator: 'is', value: ['pro', '2'] }]);
    rejects(parseEventsParams, 'filters=[', ['filters']);
    rejects(parseEventsParams, `filters=${json([{ name: 'nope', operator: 'is', value: ['x'] }])}`, ['filters', '0', 'name']);
    rejects(parseEventsParams, `filters=${json([{ name: 'path', operator: 'like', value: ['x'] }])}`, ['filters', '0', 'operator']);
    rejects(parseEventsParams, `filters=${json([{ name: 'path', operator: 'is', value: [] }])}`, ['filters', '0', 'value']);
  });

  it('format', () => {
    assert.equal(parseEventsParams(q('format=ndjson')).format, 'ndjson');
    rejects(parseEventsParams, 'format=csv', ['format']);
  });

  it('reports every bad parameter at once', () => {
    const err = rejects(parseEventsParams, 'limit=5000&page=0&includes=x', ['limit']);
    assert.ok(err.issues.length >= 3);
    assert.match(err.message, /^page: /); // schema order: page before limit
  });

  it('cursor round trip; garbage and page mismatch are 400s', () => {
    const text = encodeCursor(cursor);
    assert.match(text, /^[A-Za-z0-9_-]+$/);
    assert.deepEqual(decodeCursor(text), cursor);
    assert.deepEqual(parseEventsParams(q(`cursor=${text}`)).cursor, cursor);
    assert.equal(parseEventsParams(q(`cursor=${text}&page=4`)).page, 4);
    rejects(parseEventsParams, `cursor=${text}&page=2`, ['page']);
    rejects(parseEventsParams, 'cursor=abc', ['cursor']);
    const forged = Buffer.from(JSON.stringify({ v: 1, q: 'x', a: [], l: [], p: 1, t: 0 })).toString('base64url');
    rejects(parseEventsParams, `cursor=${forged}`, ['cursor']);
  });
});

describe('time bounds', () => {
  it('parses the three kinds', () => {
    assert.deepEqual(parseTimeBound('2026-03-01T10:20:30Z'), {
      kind: 'instant', text: '2026-03-01T10:20:30Z', utcSecondsMs: Date.UTC(2026, 2, 1, 10, 20, 30), fraction: '000000',
    });
    assert.deepEqual(parseTimeBound('2026-03-01T10:20:30.1234567-05:30'), {
      kind: 'instant', text: '2026-03-01T10:20:30.1234567-05:30', utcSecondsMs: Date.UTC(2026, 2, 1, 15, 50, 30), fraction: '123456',
    });
    assert.deepEqual(parseTimeBound('2026-03-01 10:20'), {
      kind: 'local', text: '2026-03-01 10:20', wallSecondsMs: Date.UTC(2026, 2, 1, 10, 20, 0), fraction: '000000',
    });
    assert.equal(parseTimeBound('2026-03-01T10'), null);
    assert.equal(parseTimeBound('2026-03-01T10:00:00+25:00'), null);
  });

  it('resolves in the project timezone', () => {
    const ny = 'America/New_York';
    assert.deepEqual(resolveBound(parseTimeBound('2026-03-01')!, ny, 'start'), { iso: '2026-03-01T05:00:00.000000Z', inclusive: true });
    // end date = through the end of that day: before the next local midnight.
    assert.deepEqual(resolveBound(parseTimeBound('2026-03-07')!, ny, 'end'), { iso: '2026-03-08T05:00:00.000000Z', inclusive: false });
    // 2026-03-08 is the spring-forward day in New York (23 hours).
    assert.deepEqual(resolveBound(parseTimeBound('2026-03-08')!, ny, 'end'), { iso: '2026-03-09T04:00:00.000000Z', inclusive: false });
    assert.deepEqual(resolveBound(parseTimeBound('2026-03-01T10:00:00.000250')!, ny, 'end'), { iso: '2026-03-01T15:00:00.000250Z', inclusive: true });
    assert.deepEqual(resolveBound(parseTimeBound('2026-03-01T10:00:00Z')!, ny, 'start'), { iso: '2026-03-01T10:00:00.000000Z', inclusive: true });
  });
});

describe('export chart params', () => {
  const series = (s: unknown) => `series=${json(s)}`;

  it('defaults: event segment, no filters, 7d, no interval, no previous', () => {
    const p = parseChartParams(q(series([{ name: 'screen_view' }])));
    assert.deepEqual(p, {
      projectId: undefined,
      series: [{ name: 'screen_view', filters: [], segment: 'event' }],
      breakdowns: [], interval: undefined, previous: false, limit: 100, filters: [],
      range: '7d', startDate: undefined, endDate: undefined,
    });
  });

  it('accepts every segment, OpenPanel `events` alias, breakdowns, interval, previous, dates', () => {
    for (const segment of CHART_SEGMENTS) {
      const item = segment.startsWith('property_') ? { name: '*', segment, property: 'properties.price' } : { name: '*', segment };
      assert.equal(parseChartParams(q(series([item]))).series[0]?.segment, segment);
    }
    const p = parseChartParams(q(`events=${json([{ name: 'a', id: 'x', filters: [{ name: 'path', operator: 'is', value: ['/'] }] }])}` +
      `&breakdowns=${json([{ name: 'country' }, { name: 'properties.plan', id: 'ignored' }])}&interval=week&previous=true` +
      '&startDate=2026-01-01&endDate=2026-02-01&projectId=p1&limit=7'));
    assert.deepEqual(p.series, [{ name: 'a', id: 'x', filters: [{ name: 'path', operator: 'is', value: ['/'] }], segment: 'event' }]);
    assert.deepEqual(p.breakdowns, [{ name: 'country' }, { name: 'properties.plan' }]);
    assert.equal(p.interval, 'week');
    assert.equal(p.previous, true);
    assert.equal(p.startDate, '2026-01-01');
    assert.equal(p.projectId, 'p1');
    assert.equal(p.limit, 7);
    // series wins over events
    assert.equal(parseChartParams(q(`${series([{ name: 's' }])}&events=${json([{ name: 'e' }])}`)).series[0]?.name, 's');
  });

  it('rejects every bad parameter with its path', () => {
    rejects(parseChartParams, '', ['series']);
    rejects(parseChartParams, 'series=[{', ['series']);
    rejects(parseChartParams, series([]), ['series']);
    rejects(parseChartParams, series({ name: 'a' }), ['series']);
    rejects(parseChartParams, series([{ name: 'a', segment: 'visitors' }]), ['series', '0', 'segment']);
    rejects(parseChartParams, series([{ name: 'a', segment: 'property_sum' }]), ['series', '0', 'property']);
    rejects(parseChartParams, series([{ name: 'a', segment: 'property_max', property: 'properties.' }]), ['series', '0', 'property']);
    rejects(parseChartParams, series([{ name: '' }]), ['series', '0', 'name']);
    rejects(parseChartParams, series([{ name: 'session_start' }]), ['series', '0', 'name']);
    rejects(parseChartParams, series([{ name: 'a', type: 'formula' }]), ['series', '0', 'type']);
    rejects(parseChartParams, series([{ name: 'a', filters: [{ name: 'nope', operator: 'is', value: ['x'] }] }]), ['series', '0', 'filters', '0', 'name']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&breakdowns=${json([{ name: 'nope' }])}`, ['breakdowns', '0', 'name']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&breakdowns=${json([{ name: 'country' }, { name: 'city' }, { name: 'os' }, { name: 'path' }])}`, ['breakdowns']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&breakdowns=nope`, ['breakdowns']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&interval=second`, ['interval']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&previous=yes`, ['previous']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&limit=1001`, ['limit']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&range=8d`, ['range']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&startDate=2026-01-01`, ['endDate']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&startDate=2026-01-02&endDate=2026-01-01`, ['endDate']);
    rejects(parseChartParams, `${series([{ name: 'a' }])}&startDate=2026-1-02&endDate=2026-01-03`, ['startDate']);
    rejects(parseChartParams, series(Array.from({ length: 27 }, () => ({ name: 'a' }))), ['series']);
  });
});

describe('chart arithmetic (OpenPanel format)', () => {
  it('round, average of non-zero points, metrics', () => {
    assert.equal(round(1.005), 1.01);
    assert.equal(round(2.25, 1), 2.3);
    assert.equal(averageNonZero([0, 2, 0, 4]), 3);
    assert.equal(averageNonZero([0, 0]), 0);
    assert.deepEqual(seriesMetrics([0, 1, 2, 0, 4]), { sum: 7, average: 2.33, min: 0, max: 4 });
  });

  it('previous metric: diff, state, value', () => {
    assert.deepEqual(previousMetric(15, 10), { diff: 50, state: 'positive', value: 10 });
    assert.deepEqual(previousMetric(5, 10), { diff: 50, state: 'negative', value: 10 });
    assert.deepEqual(previousMetric(10, 10), { diff: null, state: 'neutral', value: 10 });
    assert.deepEqual(previousMetric(3, 0), { diff: null, state: 'positive', value: 0 });
    assert.equal(previousMetric(3, undefined), undefined);
    assert.deepEqual(previousMetric(1, 3), { diff: 66.7, state: 'negative', value: 3 });
  });
});
