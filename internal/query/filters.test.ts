import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileAll, compileFilter, escapeLike, filterLevel, regexValues, splitFilters, SqlParams } from './filters';
import type { Filter } from './params';

const compile = (filter: Filter, alias = 'e') => {
  const params = new SqlParams();
  return { sql: compileFilter(filter, alias, params), values: params.values };
};

describe('filters', () => {
  it('SqlParams numbers placeholders in order', () => {
    const p = new SqlParams();
    assert.equal(p.add('a'), '$1');
    assert.equal(p.add(['b']), '$2');
    assert.deepEqual(p.values, ['a', ['b']]);
  });

  it('splits session-level and event-level names', () => {
    for (const n of ['referrer', 'utm_source', 'country', 'city', 'browser_version', 'model']) assert.equal(filterLevel(n), 'session');
    for (const n of ['path', 'origin', 'name', 'profile_id', 'properties.plan']) assert.equal(filterLevel(n), 'event');
    const split = splitFilters([
      { name: 'path', operator: 'is', value: ['/'] },
      { name: 'country', operator: 'is', value: ['DE'] },
      { name: 'properties.plan', operator: 'is', value: ['pro'] },
    ]);
    assert.deepEqual(split.session.map((f) => f.index), [1]);
    assert.deepEqual(split.event.map((f) => f.index), [0, 2]);
  });

  it('is / isNot use ANY / ALL over a text[] parameter', () => {
    assert.deepEqual(compile({ name: 'path', operator: 'is', value: ['/a', '/b'] }), {
      sql: 'e.path = ANY($1::text[])',
      values: [['/a', '/b']],
    });
    assert.deepEqual(compile({ name: 'country', operator: 'isNot', value: ['DE'] }, 's'), {
      sql: 's.country <> ALL($1::text[])',
      values: [['DE']],
    });
  });

  it('contains / startsWith / endsWith build escaped LIKE patterns', () => {
    assert.deepEqual(compile({ name: 'path', operator: 'contains', value: ['50%_off\\x'] }), {
      sql: 'e.path LIKE ANY($1::text[])',
      values: [['%50\\%\\_off\\\\x%']],
    });
    assert.deepEqual(compile({ name: 'path', operator: 'doesNotContain', value: ['a', 'b'] }), {
      sql: 'e.path NOT LIKE ALL($1::text[])',
      values: [['%a%', '%b%']],
    });
    assert.deepEqual(compile({ name: 'origin', operator: 'startsWith', value: ['https://'] }).values, [['https://%']]);
    assert.deepEqual(compile({ name: 'origin', operator: 'endsWith', value: ['.com'] }).values, [['%.com']]);
    assert.equal(escapeLike('a_b%c\\'), 'a\\_b\\%c\\\\');
  });

  it('regex uses ~ ANY', () => {
    assert.deepEqual(compile({ name: 'name', operator: 'regex', value: ['^sign(up|in)$'] }), {
      sql: 'e.name ~ ANY($1::text[])',
      values: [['^sign(up|in)$']],
    });
  });

  it('properties.<key> reads the key as a parameter, missing as empty text', () => {
    assert.deepEqual(compile({ name: 'properties.plan; DROP TABLE x', operator: 'is', value: ['pro'] }), {
      sql: "coalesce(e.properties ->> $1::text, '') = ANY($2::text[])",
      values: ['plan; DROP TABLE x', ['pro']],
    });
  });

  it('compileAll ANDs the filters and is true without any', () => {
    const params = new SqlParams();
    params.add('project');
    const sql = compileAll(
      [
        { index: 0, filter: { name: 'path', operator: 'is', value: ['/'] } },
        { index: 3, filter: { name: 'properties.k', operator: 'contains', value: ['v'] } },
      ],
      'e',
      params,
    );
    assert.equal(sql, "(e.path = ANY($2::text[])) AND (coalesce(e.properties ->> $3::text, '') LIKE ANY($4::text[]))");
    assert.deepEqual(params.values, ['project', ['/'], 'k', ['%v%']]);
    assert.equal(compileAll([], 's', new SqlParams()), 'true');
  });

  it('regexValues lists each regex value with its issue path', () => {
    assert.deepEqual(
      regexValues([
        { name: 'path', operator: 'is', value: ['x'] },
        { name: 'path', operator: 'regex', value: ['a', '('] },
      ]),
      [
        { pattern: 'a', path: ['filters', '1', 'value', '0'] },
        { pattern: '(', path: ['filters', '1', 'value', '1'] },
      ],
    );
  });
});
