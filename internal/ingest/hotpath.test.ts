// The ingest hot path's shortcuts answer exactly as the plain code they replace: the
// bounded caches, the device id cache, checkStorable's fault order, the reserved-key fast
// path (vs zod), the client IP without the socket address when it cannot matter, and the
// ISO time cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { GenerationalCache } from './cache';
import { DeviceIdCache, deviceIdFor } from './identity';
import { checkStorable } from './handler';
import { clientIp, clientIpOf, CONSUMED_KEYS, ConsumedProps, isoTime, splitReserved } from './ops';
import { parseIsoMs } from './schemas';
import { deviceOverridesOf } from './device-overrides';
import { BadRequestError } from '../http/errors';

test('GenerationalCache: hits, promotion from the previous generation, at most max entries', () => {
  const c = new GenerationalCache<string, number>(4);
  c.set('a', 1);
  c.set('b', 2);
  assert.equal(c.get('a'), 1);
  c.set('c', 3); // current full (2): a, b become the previous generation
  assert.equal(c.get('b'), 2); // promoted
  c.set('d', 4); // rotates again: c, b previous
  assert.equal(c.get('a'), undefined); // two generations ago
  assert.equal(c.get('c'), 3);
  assert.equal(c.get('zzz'), undefined);
  for (let i = 0; i < 1000; i++) c.set(`k${i}`, i);
  assert.ok(c.size <= 4, `size ${c.size}`);
  assert.equal(c.get('k999'), 999);
  assert.throws(() => new GenerationalCache(1));
});

test('DeviceIdCache answers deviceIdFor for every input, bounded', () => {
  const cache = new DeviceIdCache(100);
  const salts = ['s1', 's2'];
  const uas = ['Mozilla/5.0 A', 'Mozilla/5.0 B', ''];
  const ips = ['1.2.3.4', '::1', ''];
  const projects = ['p1', 'p2'];
  for (let round = 0; round < 30; round++) {
    for (const s of salts) for (const u of uas) for (const i of ips) for (const p of projects) {
      assert.equal(cache.get(s, u, i + (round % 7 ? '' : ''), p), deviceIdFor(s, u, i, p));
    }
    for (let k = 0; k < 20; k++) assert.equal(cache.get('s1', `ua${round}-${k}`, '9.9.9.9', 'p'), deviceIdFor('s1', `ua${round}-${k}`, '9.9.9.9', 'p'));
    assert.ok(cache.size <= 100, `size ${cache.size}`);
  }
  // a key part containing the old separator cannot alias another key
  assert.equal(cache.get('s', 'a\n1.1.1.1', '', 'p'), deviceIdFor('s', 'a\n1.1.1.1', '', 'p'));
  assert.equal(cache.get('s', 'a', '1.1.1.1', 'p'), deviceIdFor('s', 'a', '1.1.1.1', 'p'));
});

/** checkStorable before the rewrite (an explicit stack), the reference for the fault reported. */
const MAX_DEPTH = 64;
const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
function referenceCheckStorable(value: unknown): void {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') {
      if (LONE.test(v)) throw new BadRequestError('strings must be well-formed Unicode (no lone surrogates)');
    } else if (v && typeof v === 'object') {
      if (depth >= MAX_DEPTH) throw new BadRequestError(`JSON nested deeper than ${MAX_DEPTH} levels`);
      for (const [k, child] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
        if (typeof k === 'string' && LONE.test(k)) throw new BadRequestError('keys must be well-formed Unicode (no lone surrogates)');
        stack.push([child, depth + 1]);
      }
    }
  }
}
const outcome = (f: () => void) => {
  try {
    f();
    return 'ok';
  } catch (err) {
    return (err as Error).message;
  }
};

test('checkStorable reports the same fault as the stack-based original, whatever the mix', () => {
  const str = fc.oneof(fc.string(), fc.constantFrom('\uD800', 'a\uDC00', '\uD83D\uDE00', 'x'));
  const deep = (n: number, leaf: unknown): unknown => (n === 0 ? leaf : n % 2 ? [deep(n - 1, leaf)] : { k: deep(n - 1, leaf) });
  const value = fc.letrec((tie) => ({
    v: fc.oneof(
      { depthSize: 'small' },
      str, fc.integer(), fc.boolean(), fc.constant(null),
      fc.array(tie('v'), { maxLength: 4 }),
      fc.dictionary(str, tie('v'), { maxKeys: 4 }),
      fc.tuple(fc.integer({ min: 60, max: 70 }), str).map(([n, leaf]) => deep(n, leaf)),
    ),
  })).v;
  fc.assert(fc.property(value, (v) => {
    assert.equal(outcome(() => checkStorable(v)), outcome(() => referenceCheckStorable(v)));
  }), { numRuns: 3000 });
});

/** splitReserved before the fast path: zod decides every reserved value (and device override). */
function referenceSplit(props: Record<string, unknown> | undefined, path: string[]) {
  const properties: Record<string, unknown> = {};
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(props ?? {})) {
    if (CONSUMED_KEYS.includes(k)) raw[k] = v;
    else properties[k] = v;
  }
  const parsed = ConsumedProps.safeParse(raw);
  if (!parsed.success) throw BadRequestError.fromZod(parsed.error, path);
  const r = parsed.data;
  return {
    properties,
    reserved: {
      timestampMs: r.__timestamp ? parseIsoMs(r.__timestamp) : null, ip: r.__ip ?? null, deviceId: r.__deviceId ?? null,
      url: r.__path ?? null, title: r.__title ?? null, referrer: r.__referrer ?? null, device: deviceOverridesOf(r),
    },
  };
}
const result = (f: () => unknown) => {
  try {
    return { ok: f() };
  } catch (err) {
    return { err: (err as Error).message, issues: (err as BadRequestError).issues };
  }
};

test('splitReserved: the fast path returns what zod returns, and zod still words every refusal', () => {
  const len = (n: number, c = 'a') => c.repeat(n);
  const reservedValue = fc.oneof(
    fc.string(), fc.integer(), fc.constant(null), fc.boolean(), fc.array(fc.string(), { maxLength: 2 }),
    fc.constantFrom('', ' ', '  1.2.3.4 ', '2026-11-22', '2026-11-22T10:11:12Z', '2026-02-30T00:00:00Z', '2026-11-22 10:11', '2026-11-22T25:00:00Z',
      '2026-11-22t10:11:12.123456789+02:00', 'not a date', len(64), len(65), ` ${len(64)} `, len(128), len(129), len(256), len(257), ` ${len(256)} `, len(2048), len(2049), len(8192), len(8193), '\uD800'),
    fc.double(), fc.constant(17.4), fc.constant({}),
  );
  const props = fc.dictionary(fc.oneof(fc.constantFrom(...CONSUMED_KEYS), fc.string({ maxLength: 6 })), reservedValue, { maxKeys: 8 });
  fc.assert(fc.property(fc.option(props, { nil: undefined }), (p) => {
    assert.deepEqual(result(() => splitReserved(p, ['payload', 'properties'])), result(() => referenceSplit(p, ['payload', 'properties'])));
  }), { numRuns: 5000 });
});

test('clientIpOf reads the socket address only when it can matter, and answers as clientIp', () => {
  const headerValues = [undefined, '', '1.2.3.4', ' 1.2.3.4 , 5.6.7.8', '::ffff:1.2.3.4', 'nonsense', '::1', 'a,1.2.3.4'];
  const overrides = [null, '', '9.9.9.9', 'bad', '::ffff:9.9.9.9'];
  const remotes = ['127.0.0.1', '::ffff:10.0.0.1', '', 'garbage'];
  for (const h of headerValues) for (const o of overrides) for (const r of remotes) {
    const headers: Record<string, string> = h === undefined ? {} : { 'x-client-ip': h };
    let read = false;
    const req = { headers, get remoteAddress() { read = true; return r; } };
    const expected = clientIp(headers, r, o);
    assert.equal(clientIpOf(req, o), expected, JSON.stringify({ h, o, r }));
    const decidedBefore = clientIp(headers, '', o) !== null;
    assert.equal(read, !decidedBefore, JSON.stringify({ h, o, r, read }));
  }
});

test('isoTime is toISOString', () => {
  const base = Date.parse('2026-11-22T23:59:59.998Z');
  for (const ms of [base, base, base + 1, base, base + 2, base + 1, 0, -1, 253402300799999, base + 86_400_000]) {
    assert.equal(isoTime(ms), new Date(ms).toISOString());
  }
  assert.throws(() => isoTime(8.64e15 + 1), RangeError);
});
