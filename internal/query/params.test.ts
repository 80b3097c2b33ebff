import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BadRequestError } from '../http/errors';
import { parsePageParams, parsePeriodParams, RANGES } from './params';

const q = (s: string) => new URLSearchParams(s);

/** Asserts a 400 whose first issue path is `path`. */
function rejects(query: string, path: string[], parse: (q: URLSearchParams) => unknown = parsePageParams): BadRequestError {
  try {
    parse(q(query));
  } catch (err) {
    assert.ok(err instanceof BadRequestError, `expected BadRequestError, got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.deepEqual(err.issues[0]?.path, path, JSON.stringify(err.issues));
    for (const issue of err.issues) assert.ok(issue.message.length > 0);
    return err;
  }
  assert.fail(`expected 400 for ?${query}`);
}

const filters = (f: unknown) => `filters=${encodeURIComponent(JSON.stringify(f))}`;

describe('insights params', () => {
  it('applies the defaults', () => {
    assert.deepEqual(parsePageParams(q('')), { range: '7d', filters: [], cursor: 1, limit: 10 });
    assert.deepEqual(parsePeriodParams(q('')), { range: '7d', filters: [] });
  });

  it('accepts every documented range', () => {
    for (const range of RANGES) assert.equal(parsePageParams(q(`range=${range}`)).range, range);
  });

  it('accepts a full valid query', () => {
    const parsed = parsePageParams(
      q(`startDate=2024-02-29&endDate=2024-03-01&range=30d&cursor=3&limit=50&${filters([
        { name: 'path', operator: 'startsWith', value: ['/docs'] },
        { name: 'properties.plan', operator: 'is', value: ['pro', 2, true] },
      ])}`),
    );
    assert.deepEqual(parsed, {
      startDate: '2024-02-29',
      endDate: '2024-03-01',
      range: '30d',
      cursor: 3,
      limit: 50,
      filters: [
        { name: 'path', operator: 'startsWith', value: ['/docs'] },
        { name: 'properties.plan', operator: 'is', value: ['pro', '2', 'true'] },
      ],
    });
  });

  it('accepts the same start and end day', () => {
    const parsed = parsePeriodParams(q('startDate=2026-03-29&endDate=2026-03-29'));
    assert.equal(parsed.startDate, '2026-03-29');
  });

  it('rejects a bad range', () => {
    const err = rejects('range=8d', ['range']);
    assert.match(err.message, /range/);
    rejects('range=', ['range']);
    rejects('range=7D', ['range']);
    // Only the first value of a repeated parameter is read.
    assert.equal(parsePageParams(q('range=30d&range=x')).range, '30d');
  });

  it('rejects a bad date', () => {
    rejects('startDate=2026-3-01&endDate=2026-03-02', ['startDate']);
    rejects('startDate=20260301&endDate=2026-03-02', ['startDate']);
    rejects('startDate=2026-03-01&endDate=2026-03-02T00:00:00Z', ['endDate']);
    rejects('startDate=2026-13-01&endDate=2026-13-02', ['startDate']);
    rejects('startDate=0000-01-01&endDate=2026-01-02', ['startDate']);
  });

  it('a malformed date is one issue, not also "endDate must not be before startDate"', () => {
    for (const query of ['startDate=2026-1-1&endDate=2026-01-05', 'startDate=2026-03-05&endDate=2026-3-1', 'startDate=2026-02-30&endDate=2026-02-01']) {
      const err = rejects(query, [query.includes('startDate=2026-03-05') ? 'endDate' : 'startDate'], parsePeriodParams);
      assert.equal(err.issues.length, 1, JSON.stringify(err.issues));
    }
  });

  it('a date that is not YYYY-MM-DD at all, or a huge cursor or limit, is one issue', () => {
    for (const [query, path] of [
      ['startDate=20261101&endDate=2026-11-02', 'startDate'], ['startDate=2026-11-01T00:00:00Z&endDate=2026-11-02', 'startDate'],
      ['startDate=2026-11-01&endDate=', 'endDate'], ['cursor=99999999999999999999', 'cursor'], ['cursor=9007199254740992', 'cursor'],
      ['limit=99999999999999999999', 'limit'],
    ] as const) {
      const err = rejects(query, [path]);
      assert.equal(err.issues.length, 1, `${query}: ${JSON.stringify(err.issues)}`);
    }
  });

  it('bounds a period: years 1900..9998, at most 20 years (docs/insights-decisions.md)', () => {
    assert.equal(parsePeriodParams(q('startDate=1900-01-01&endDate=1920-12-31')).startDate, '1900-01-01');
    rejects('startDate=1899-12-31&endDate=1900-01-02', ['startDate']);
    rejects('startDate=2000-01-01&endDate=2021-01-01', ['endDate']);
    rejects('startDate=9998-01-01&endDate=9999-01-01', ['endDate']);
  });

  it('rejects Feb 30 and Feb 29 of a common year', () => {
    rejects('startDate=2026-02-01&endDate=2026-02-30', ['endDate']);
    rejects('startDate=2025-02-29&endDate=2025-03-01', ['startDate']);
    rejects('startDate=2026-04-31&endDate=2026-05-01', ['startDate']);
  });

  it('rejects only one of startDate/endDate', () => {
    rejects('startDate=2026-03-01', ['endDate']);
    rejects('endDate=2026-03-01', ['startDate']);
    rejects('startDate=2026-03-01', ['endDate'], parsePeriodParams);
  });

  it('rejects a start after the end', () => {
    rejects('startDate=2026-03-02&endDate=2026-03-01', ['endDate']);
    rejects('startDate=2026-03-02&endDate=2026-03-01', ['endDate'], parsePeriodParams);
  });

  it('rejects limit 0, 51, abc, 1.5 and -1', () => {
    rejects('limit=0', ['limit']);
    rejects('limit=51', ['limit']);
    rejects('limit=abc', ['limit']);
    rejects('limit=1.5', ['limit']);
    rejects('limit=-1', ['limit']);
    rejects('limit=', ['limit']);
    assert.equal(parsePageParams(q('limit=1')).limit, 1);
    assert.equal(parsePageParams(q('limit=50')).limit, 50);
  });

  it('rejects cursor 0 and non-integers', () => {
    rejects('cursor=0', ['cursor']);
    rejects('cursor=x', ['cursor']);
    rejects('cursor=99999999999999999999', ['cursor']);
    assert.equal(parsePageParams(q('cursor=7')).cursor, 7);
  });

  it('ignores cursor and limit where there is no paging', () => {
    assert.deepEqual(parsePeriodParams(q('limit=abc&cursor=0')), { range: '7d', filters: [] });
  });

  it('rejects filters that are not JSON or not an array', () => {
    rejects('filters=%5B%7B', ['filters']);
    rejects('filters=', ['filters']);
    rejects(filters({ name: 'path', operator: 'is', value: ['/'] }), ['filters']);
  });

  it('rejects an unknown filter name', () => {
    rejects(filters([{ name: 'path', operator: 'is', value: ['/'] }, { name: 'title', operator: 'is', value: ['x'] }]), ['filters', '1', 'name']);
    rejects(filters([{ name: 'properties.', operator: 'is', value: ['x'] }]), ['filters', '0', 'name']);
    rejects(filters([{ name: 'utm_foo', operator: 'is', value: ['x'] }]), ['filters', '0', 'name']);
    rejects(filters([{ name: 'path; DROP TABLE events', operator: 'is', value: ['x'] }]), ['filters', '0', 'name']);
  });

  it('rejects an unknown operator', () => {
    rejects(filters([{ name: 'path', operator: 'equals', value: ['/'] }]), ['filters', '0', 'operator']);
    rejects(filters([{ name: 'path', value: ['/'] }]), ['filters', '0', 'operator']);
  });

  it('rejects an empty or missing value', () => {
    rejects(filters([{ name: 'path', operator: 'is', value: [] }]), ['filters', '0', 'value']);
    rejects(filters([{ name: 'path', operator: 'is' }]), ['filters', '0', 'value']);
    rejects(filters([{ name: 'path', operator: 'is', value: '/' }]), ['filters', '0', 'value']);
    rejects(filters([{ name: 'path', operator: 'is', value: [null] }]), ['filters', '0', 'value', '0']);
    rejects(filters([{ name: 'path', operator: 'is', value: ['a\u0000b'] }]), ['filters', '0', 'value', '0']);
  });

  it('accepts every column name and properties.<key>', () => {
    const names = [
      'path', 'origin', 'name', 'profile_id', 'referrer', 'referrer_name', 'referrer_type',
      'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content', 'country', 'region',
      'city', 'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
      'properties.plan', 'properties.a.b',
    ];
    const parsed = parsePageParams(q(filters(names.map((name) => ({ name, operator: 'is', value: ['x'] })))));
    assert.deepEqual(parsed.filters.map((f) => f.name), names);
  });

  it('gt/gte/lt/lte take numbers only; the 400 names the value that is not one', () => {
    const parsed = parsePeriodParams(q(filters([
      { name: 'properties.amount', operator: 'gt', value: ['10', 2.5, '-3', '.5', '1e3', '+7'] },
      { name: 'os_version', operator: 'lte', value: ['17.4'] },
    ])));
    assert.deepEqual(parsed.filters[0]!.value, ['10', '2.5', '-3', '.5', '1e3', '+7']);
    for (const op of ['gt', 'gte', 'lt', 'lte']) {
      rejects(filters([{ name: 'properties.amount', operator: op, value: ['1', 'ten'] }]), ['filters', '0', 'value', '1'], parsePeriodParams);
      rejects(filters([{ name: 'properties.amount', operator: op, value: [] }]), ['filters', '0', 'value'], parsePeriodParams);
    }
    for (const bad of ['0x10', 'Infinity', 'NaN', ' 1', '1e99999', '1e10000', '1.2.3', '', true]) {
      rejects(filters([{ name: 'properties.amount', operator: 'gt', value: [bad] }]), ['filters', '0', 'value', '0'], parsePeriodParams);
    }
  });

  it('isNull/isNotNull take an empty or missing value (any value is ignored); no other operator does', () => {
    const parsed = parsePeriodParams(q(filters([
      { name: 'referrer_name', operator: 'isNull', value: [] },
      { name: 'properties.plan', operator: 'isNotNull' },
      { name: 'city', operator: 'isNull', value: ['x'] },
    ])));
    assert.deepEqual(parsed.filters, [
      { name: 'referrer_name', operator: 'isNull', value: [] },
      { name: 'properties.plan', operator: 'isNotNull', value: [] },
      { name: 'city', operator: 'isNull', value: ['x'] },
    ]);
    rejects(filters([{ name: 'city', operator: 'contains' }]), ['filters', '0', 'value'], parsePeriodParams);
    rejects(filters([{ name: 'city', operator: 'isEmpty', value: [] }]), ['filters', '0', 'operator'], parsePeriodParams);
  });
});
