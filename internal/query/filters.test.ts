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

  it('isNull / isNotNull test the value against empty text (a missing property coalesces to it), no parameter', () => {
    assert.deepEqual(compile({ name: 'referrer_name', operator: 'isNull', value: [] }, 's'), { sql: "coalesce(s.referrer_name, '') = ''", values: [] });
    assert.deepEqual(compile({ name: 'properties.plan', operator: 'isNotNull', value: ['ignored'] }), {
      sql: "coalesce(coalesce(e.properties ->> $1::text, ''), '') <> ''",
      values: ['plan'],
    });
  });

  it('gt / gte / lt / lte cast only a stored text that is a number, and compare as numeric with ANY', () => {
    const ops = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;
    for (const [op, sym] of Object.entries(ops)) {
      const { sql, values } = compile({ name: 'os_version', operator: op as keyof typeof ops, value: ['17', '17.5'] }, 'r');
      assert.equal(
        sql,
        `CASE WHEN length(r.os_version) <= 1000 AND r.os_version ~ '^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]{1,4})?$' THEN r.os_version::numeric ${sym} ANY($1::numeric[]) ELSE false END`,
      );
      assert.deepEqual(values, [['17', '17.5']]);
    }
  });

  it('compileFilter is pure: the same filter over another alias names only that alias', () => {
    const filter: Filter = { name: 'country', operator: 'gte', value: ['1'] };
    const a = compile(filter, 'x');
    const b = compile(filter, 'x');
    assert.deepEqual(a, b);
    assert.ok(!/\be\./.test(a.sql) && /\bx\.country\b/.test(a.sql), a.sql);
  });
});
