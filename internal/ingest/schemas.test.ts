// TrackBody's hand-written fast path returns exactly what zod returns, or leaves the body to
// zod; through parseJsonBody every body gets the same answer or the same issues as zod alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { EventBody, TrackBody, trackBodyFast } from './schemas';
import { parseJsonBody } from './handler';
import { splitReserved } from './ops';
import { BadRequestError } from '../http/errors';
import type { HttpRequest } from '../http/types';

const str = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.constantFrom('', ' ', ' screen_view ', 'session_start', ' session_end ', 'a'.repeat(256), ` ${'a'.repeat(256)} `, 'a'.repeat(257), '__proto__', 'constructor'),
);
const json = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, str, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null),
    fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(str, tie('v'), { maxKeys: 3 })),
})).v;
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const groups = fc.oneof(fc.array(str, { maxLength: 4 }), fc.array(fc.constant('g'), { minLength: 99, maxLength: 102 }), json);
const props = fc.oneof(fc.dictionary(fc.oneof(str, fc.constantFrom('__path', 'constructor', '__proto__', '0', '12')), json, { maxKeys: 5 }), json);
const payload = fc.record({
  name: fc.oneof(str, json), properties: maybe(props), profileId: maybe(fc.oneof(str, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), json)),
  groups: maybe(groups), extra: maybe(json),
}, { requiredKeys: [] });
const plain = fc.string({ minLength: 1, maxLength: 10 });
const likelyValid = fc.record({
  type: fc.constant('track'),
  payload: fc.record({
    name: fc.oneof(plain, str), properties: maybe(fc.dictionary(fc.oneof(plain, str), json, { maxKeys: 5 })),
    profileId: maybe(fc.oneof(plain, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }))),
    groups: maybe(fc.array(fc.oneof(plain, str), { maxLength: 3 })), extra: maybe(json),
  }, { requiredKeys: ['name'] }),
  other: maybe(json),
}, { requiredKeys: ['type', 'payload'] });
const body = fc.oneof(
  likelyValid,
  fc.record({ type: fc.constantFrom('track', 'identify', 'Track', 'group'), payload: fc.oneof(payload, json), other: maybe(json) }, { requiredKeys: [] }),
  json,
);
/** Through JSON, as the handler sees it (undefined members dropped, __proto__ as an own key). */
const roundTrip = (v: unknown) => JSON.parse(JSON.stringify(v) ?? 'null');

test('trackBodyFast: zod\'s value when it answers, including key order', () => {
  let answered = 0;
  fc.assert(fc.property(body, (b) => {
    const data = roundTrip(b);
    const fast = trackBodyFast(data);
    if (fast === undefined) return;
    answered++;
    const z = TrackBody.safeParse(data);
    assert.ok(z.success, `fast path accepted what zod refuses: ${JSON.stringify(data)}`);
    assert.deepStrictEqual(fast, z.data);
    assert.equal(JSON.stringify(fast), JSON.stringify(z.data));
  }), { numRuns: 20000 });
  assert.ok(answered > 2000, `fast path answered only ${answered} bodies`);
});

test('trackBodyFast answers the common bodies (so the hot path skips zod)', () => {
  const data = { type: 'track', payload: { name: ' screen_view ', properties: { __path: 'https://x/y', plan: 'pro', i: 3 }, profileId: 42, groups: [' g1 '] } };
  assert.deepEqual(trackBodyFast(roundTrip(data)), { type: 'track', payload: { name: 'screen_view', properties: data.payload.properties, profileId: '42', groups: ['g1'] } });
  assert.equal(trackBodyFast({ type: 'track', payload: { name: 'session_start' } }), undefined);
});

test('parseJsonBody(TrackBody) answers as zod alone, issues included', () => {
  const req = (text: string) => ({ headers: { 'content-type': 'application/json' }, body: Buffer.from(text) }) as unknown as HttpRequest;
  const viaZod = (data: unknown) => {
    const r = TrackBody.safeParse(data);
    if (!r.success) throw BadRequestError.fromZod(r.error);
    return r.data;
  };
  const outcome = (f: () => unknown) => {
    try {
      return { ok: JSON.stringify(f()) };
    } catch (err) {
      return { err: (err as Error).message, issues: (err as BadRequestError).issues };
    }
  };
  fc.assert(fc.property(body, (b) => {
    const text = JSON.stringify(b) ?? 'null';
    assert.deepEqual(outcome(() => parseJsonBody(req(text), TrackBody)), outcome(() => viaZod(JSON.parse(text))));
  }), { numRuns: 5000 });
});

test('a timestamp that is not ISO 8601 at all is one 400 issue, not two', () => {
  const issues = (data: unknown) => {
    const r = EventBody.safeParse(data);
    assert.ok(!r.success);
    return BadRequestError.fromZod(r.error).issues;
  };
  for (const ts of ['garbage', '1700000000', '2026-11-20T25:00']) {
    const e = issues({ name: 'x', timestamp: ts });
    assert.deepEqual(e.map((i) => i.path), [['timestamp']], JSON.stringify(e));
    // A track payload's __timestamp is checked where the reserved keys are split off.
    const t = (() => {
      try {
        splitReserved({ __timestamp: ts }, ['payload', 'properties']);
      } catch (err) {
        return (err as BadRequestError).issues;
      }
      assert.fail(`__timestamp ${ts} accepted`);
    })();
    assert.deepEqual(t.map((i) => i.path), [['payload', 'properties', '__timestamp']], JSON.stringify(t));
  }
});
