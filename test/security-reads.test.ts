// Security of the read side, against one running app (API + worker) with two projects:
// - Tenant isolation on every read path: a read client of A gets 403 for B on every insights
//   endpoint and both exports (also through projectId / project_id and path tricks), its
//   answers for A never contain B's data, a write client gets 403 everywhere, root reads both.
// - SQL injection through every filter field, property name, breakdown, chart series, export
//   `event` / `profileId` / `includes` and the breakdown path segment: 2xx/4xx only, and every
//   table is intact afterwards (row counts before/after).
// - LIKE escaping: `%`, `_` and `\` in contains/startsWith/endsWith values match literally,
//   checked property-based against a JavaScript oracle over seeded values.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { TestEnv, startApp, post, track, waitFor, type Credentials } from './support/harness';
import { assertSane, CaseCounter, credHeaders, pool, request, runs, type Answer } from './support/fuzz-kit';

const DIMENSIONS = [
  'referrer', 'referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content',
  'country', 'region', 'city', 'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
];
const INSIGHTS = ['metrics', 'live', 'pages', ...DIMENSIONS];
const FILTER_COLUMNS = ['path', 'origin', 'name', 'profile_id', ...DIMENSIONS];
const TABLES = ['projects', 'clients', 'events', 'sessions', 'profiles', 'groups', 'op_failures', 'shard_offsets', 'schema_migrations'];
/** Values of properties.lit in project A: the LIKE-escaping oracle runs over these. */
const LIT = ['100%', '100x', '1000', '%', '%%', 'a_b', 'axb', 'a__b', '_', 'back\\slash', 'back/slash', '\\', '\\%', "it's", 'it"s', '50% off_now', 'x', '', 'ünï_%', '😀%😀', '.*', '(a+)+$', '[abc]', 'a\\_b'];

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let A: string;
let B: string;
let readersA: Credentials[] = [];
let readerB: Credentials;
let writerA: Credentials;
let writerB: Credentials;
let root: Credentials;
let nextA = 0;
const cases = new CaseCounter();
const started = Date.now();
/** Strings that exist only in project B's data. */
const secretB = `onlyB${randomBytes(6).toString('hex')}`;
const secretA = `onlyA${randomBytes(6).toString('hex')}`;

/** Strings that only B's stored data contains (never a request parameter). */
const dataOfB = () => [`${secretB}value`, `${secretB}-profile`, `${secretB}.example`, `${secretB} title`, `${secretB}-ref`, `${secretB}-group`, `"secret":"${secretB}"`, `/${secretB}/page`];
const readerA = () => readersA[nextA++ % readersA.length]!;

before(async () => {
  env = await new TestEnv('secreads').setup();
  app = await startApp(env, { api: true, worker: true });
  A = await env.project({ name: 'Tenant A' });
  B = await env.project({ name: 'Tenant B' });
  // The read limit is 100 requests / 10 s per client: spread the work.
  readersA = await Promise.all(Array.from({ length: 16 }, () => env.client(A, 'read', 0)));
  [readerB, writerA, writerB, root] = await Promise.all([env.client(B, 'read', 0), env.client(A, 'write', 0), env.client(B, 'write', 0), env.client(A, 'root', 0)]);
  const ua = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
  const seed = async (w: Credentials, tag: string, i: number, extra: Record<string, unknown> = {}) => {
    const r = await post(`${app.url}/track`, track(i % 2 ? 'screen_view' : `${tag}_event`, {
      __path: `https://${tag}.example/${tag}/page${i}?utm_source=${tag}&utm_campaign=${tag}c`,
      __title: `${tag} title`,
      __referrer: `https://${tag}-ref.example/`,
      secret: tag,
      [`${tag}key`]: `${tag}value`,
      ...extra,
    }, { profileId: `${tag}-profile-${i}`, groups: [`${tag}-group`] }), w, { userAgent: ua, ip: `10.${tag === secretA ? 1 : 2}.0.${i}` });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  };
  for (let i = 0; i < 6; i++) await seed(writerB, secretB, i);
  for (let i = 0; i < 6; i++) await seed(writerA, secretA, i);
  for (const [i, lit] of LIT.entries()) {
    const r = await post(`${app.url}/track`, track('lit', { lit, i }), writerA, { userAgent: ua, ip: '10.3.0.1' });
    assert.equal(r.status, 202);
  }
  await waitFor(async () => Number((await env.db.query("SELECT count(*) AS n FROM events WHERE name NOT IN ('session_start', 'session_end')")).rows[0].n) >= 12 + LIT.length, { what: 'seeded events', timeoutMs: 30_000 });
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`security-reads: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await app?.drain();
  await env?.teardown();
});

async function read(path: string, creds: Credentials | null, kind: string): Promise<Answer> {
  const a = await request(`${app.url}${path}`, { headers: creds ? credHeaders(creds) : {} });
  cases.add(kind);
  assertSane(a, { family: 'read', allowQueryTimeout: true, what: `GET ${path.slice(0, 400)}` });
  return a;
}

const enc = encodeURIComponent;
const SERIES = enc(JSON.stringify([{ name: '*' }]));
/** Every read path of a project, as a read client of that project would ask for it. */
function readPaths(p: string, withProject = true): string[] {
  const proj = withProject ? `projectId=${enc(p)}&` : '';
  return [
    ...INSIGHTS.map((e) => `/insights/${enc(p)}/${e}?range=30d`),
    `/export/events?${proj}includes=profile,meta,properties,geo,device,referrer&limit=1000`,
    `/export/events?${proj}format=ndjson&includes=properties`,
    `/export/charts?${proj}series=${SERIES}&range=30d&breakdowns=${enc(JSON.stringify([{ name: 'path' }, { name: 'properties.secret' }]))}`,
  ];
}

async function tableCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) out[t] = Number((await env.db.query(`SELECT count(*) AS n FROM ${t}`)).rows[0].n);
  return out;
}

describe('tenant isolation', () => {
  test("a read client of A gets 403 on every read path of B, however B is named", async () => {
    const paths = [
      ...readPaths(B),
      `/export/events?project_id=${B}`,
      `/export/charts?project_id=${B}&series=${SERIES}`,
      `/export/events?projectId=${B}&projectId=${A}`,
      `/export/events?project_id=${B}&projectId=`,
      `/export/charts?projectId=${B}&project_id=${B}&series=${SERIES}`,
      `/insights/${B}/metrics/`,
      `/insights//${B}/metrics`,
      `/insights/${enc(B)}%2F..%2F${A}/metrics`,
      `/insights/${B.toUpperCase()}/metrics`,
      `/insights/${B}%20/metrics`,
      `/insights/${enc(`${B}' OR '1'='1`)}/metrics`,
    ];
    await pool(paths, 6, async (p) => {
      const a = await read(p, readerA(), 'isolation');
      assert.ok([403, 404].includes(a.status), `${p}: ${a.status} ${a.text.slice(0, 200)}`);
      if (p.includes(B) && !p.includes(A) && !/%2F|\/\/|%20/.test(p)) assert.equal(a.status, 403, `${p}: ${a.text}`);
      assert.ok(!a.text.includes(secretB), `${p} leaks B`);
    });
    // Mixed projectId/project_id: never B's data.
    const mixed = await read(`/export/events?projectId=${A}&project_id=${B}`, readerA(), 'isolation');
    assert.ok([400, 403].includes(mixed.status), mixed.text);
  });

  test("A's answers never contain B's data, even with filters naming B's values", async () => {
    const f = (name: string, value: string, operator = 'is') => enc(JSON.stringify([{ name, operator, value: [value] }]));
    const paths = [
      ...readPaths(A, false),
      `/export/events?profileId=${secretB}-profile-1&includes=properties`,
      `/export/events?event=${secretB}_event&includes=properties`,
      `/export/events?filters=${f('properties.secret', secretB)}&includes=properties`,
      `/export/events?filters=${f('properties.secret', '.*', 'regex')}&includes=properties,referrer`,
      `/export/charts?series=${enc(JSON.stringify([{ name: `${secretB}_event` }, { name: '*', segment: 'group' }, { name: '*', segment: 'user' }]))}&breakdowns=${enc(JSON.stringify([{ name: `properties.${secretB}key` }]))}`,
      ...INSIGHTS.map((e) => `/insights/${A}/${e}?range=30d&filters=${f('utm_source', secretB, 'contains')}`),
      `/insights/${A}/pages?range=30d&filters=${f('path', secretB, 'contains')}`,
    ];
    let sawA = false;
    await pool(paths, 6, async (p) => {
      const a = await read(p, readerA(), 'isolation');
      assert.equal(a.status, 200, `${p}: ${a.text.slice(0, 200)}`);
      // Charts echo the series and breakdown names asked for; B's data is what must not appear.
      const leaks = p.includes(secretB) ? dataOfB().filter((m) => a.text.includes(m)) : a.text.includes(secretB) ? [secretB] : [];
      assert.deepEqual(leaks, [], `${p} leaks B: ${a.text.slice(0, 300)}`);
      if (p.startsWith('/export/charts') && p.includes(secretB)) {
        for (const s of (a.json as { series: { event: { name: string }; metrics: { count: number } }[] }).series) {
          if (s.event.name.includes(secretB)) assert.equal(s.metrics.count, 0, `B's event counted for A: ${JSON.stringify(s.metrics)}`);
        }
      }
      if (a.text.includes(secretA)) sawA = true;
    });
    assert.ok(sawA, "A's own data is there (the check is not vacuous)");
  });

  test('a write client gets 403 on every read path; root reads both projects', async () => {
    await pool([...readPaths(A), ...readPaths(B)], 6, async (p) => {
      const a = await read(p, writerA, 'isolation');
      assert.equal(a.status, 403, `${p}: ${a.status} ${a.text.slice(0, 200)}`);
    });
    for (const [p, secret, other] of [[A, secretA, secretB], [B, secretB, secretA]] as const) {
      const events = await read(`/export/events?projectId=${p}&includes=properties&limit=1000`, root, 'isolation');
      assert.equal(events.status, 200);
      assert.ok(events.text.includes(secret) && !events.text.includes(other), `root export of ${p}`);
      const pages = await read(`/insights/${p}/pages?range=30d`, root, 'isolation');
      assert.equal(pages.status, 200);
      assert.ok(pages.text.includes(secret) && !pages.text.includes(other), `root pages of ${p}: ${pages.text.slice(0, 200)}`);
      const src = await read(`/insights/${p}/utm_source?range=30d`, root, 'isolation');
      assert.ok(src.text.includes(secret) && !src.text.includes(other));
    }
    // Root must name the project on export; an unknown one is 404.
    assert.equal((await read('/export/events', root, 'isolation')).status, 400);
    assert.equal((await read('/export/events?projectId=no-such-project', root, 'isolation')).status, 404);
    // B's own reader sees B, not A.
    const b = await read(`/insights/${B}/pages?range=30d`, readerB, 'isolation');
    assert.ok(b.text.includes(secretB) && !b.text.includes(secretA));
  });
});

describe('SQL injection', () => {
  const INJECTIONS = [
    "'); DROP TABLE events; --", "x'); DROP TABLE events; --", "' OR '1'='1", '" OR "1"="1', "a\"b", "a'b", "\\'; DROP TABLE clients; --",
    "'; TRUNCATE sessions; --", "$1", "$$; DROP TABLE projects; $$", "1; DELETE FROM events", "%' OR 1=1 --", "_", "%", "\\", "\\\\",
    "' || pg_sleep(5) || '", "'::text; SELECT pg_sleep(5); --", "*/ DROP TABLE events /*", ")) OR ((1=1", "properties", "\u2028", "😀'",
    "E'\\x27'", "U&'\\0027'", "' UNION SELECT secret_hash FROM clients --", "x\"); DROP TABLE events; --",
  ];

  test('injection through filter names, values, property keys, breakdowns, series, event, profileId, includes: 2xx/4xx, tables intact', async () => {
    const before = await tableCounts();
    const filterSets: unknown[][] = [];
    for (const inj of INJECTIONS) {
      filterSets.push([{ name: `properties.${inj}`, operator: 'is', value: [inj] }]);
      filterSets.push([{ name: inj, operator: 'is', value: ['x'] }]);
      filterSets.push([{ name: 'path', operator: inj, value: ['x'] }]);
    }
    for (const col of FILTER_COLUMNS) for (const op of ['is', 'isNot', 'contains', 'doesNotContain', 'startsWith', 'endsWith', 'regex']) {
      filterSets.push([{ name: col, operator: op, value: INJECTIONS.slice(0, 8) }]);
    }
    const paths: string[] = [];
    for (const [i, fs] of filterSets.entries()) {
      const f = enc(JSON.stringify(fs));
      const endpoint = INSIGHTS[i % INSIGHTS.length];
      paths.push(`/insights/${A}/${endpoint}?range=30d&filters=${f}`);
      if (i % 3 === 0) paths.push(`/export/events?filters=${f}&includes=properties`);
      if (i % 3 === 1) paths.push(`/export/charts?series=${enc(JSON.stringify([{ name: '*', filters: fs }]))}&filters=${f}`);
    }
    for (const inj of INJECTIONS) {
      paths.push(
        `/export/events?event=${enc(inj)}&profileId=${enc(inj)}&includes=${enc(inj)}`,
        `/export/events?event=${enc(inj)}&profileId=${enc(inj)}`,
        `/export/events?includes=properties,${enc(inj)}`,
        `/export/charts?series=${enc(JSON.stringify([{ name: inj, segment: 'property_sum', property: `properties.${inj}` }, { name: '*', id: inj }]))}&breakdowns=${enc(JSON.stringify([{ name: `properties.${inj}` }]))}`,
        `/export/charts?series=${enc(JSON.stringify([{ name: '*', segment: inj }]))}&breakdowns=${enc(JSON.stringify([{ name: inj }]))}&interval=${enc(inj)}`,
        `/insights/${A}/${enc(`country${inj}`)}`,
        `/insights/${A}/metrics?range=${enc(inj)}&startDate=${enc(inj)}&endDate=${enc(inj)}`,
        `/insights/${A}/pages?cursor=${enc(inj)}&limit=${enc(inj)}`,
      );
    }
    paths.push(`/insights/${A}/country;drop`, `/insights/${A}/country;drop%20table%20events`, `/insights/${A}/country%3B%20DROP%20TABLE%20events`, `/insights/${A}/country'--`, `/insights/${A}/country%00`);
    await pool(paths, 6, async (p) => {
      const a = await read(p, readerA(), 'injection');
      if (/\/insights\/[^/]+\/country[^?]/.test(p)) assert.equal(a.status, 404, `${p}: ${a.status}`);
    });
    const afterCounts = await tableCounts();
    assert.deepEqual(afterCounts, before, 'no table changed');
    // Reads still work on the same data.
    const check = await read(`/export/events?event=lit&limit=1000&includes=properties`, readerA(), 'injection');
    assert.equal((check.json as { data: unknown[] }).data.length, LIT.length);
  });

  test('contains/startsWith/endsWith/is match %, _ and \\ literally (property-based, JavaScript oracle)', async () => {
    // Values built from the seeded strings' pieces and LIKE metacharacters.
    const piece = fc.oneof(fc.constantFrom(...LIT), fc.constantFrom('%', '_', '\\', '%%', '_%', '\\%', '\\_', '0', 'x', 'a', "'", '"', '😀', 'ü', '.*'), fc.string({ unit: 'grapheme-ascii', maxLength: 3 }));
    const value = fc.array(piece, { minLength: 1, maxLength: 3 }).map((p) => p.join('')).filter((v) => !v.includes('\u0000'));
    const ops: Record<string, (lit: string, vs: string[]) => boolean> = {
      is: (l, vs) => vs.some((v) => l === v),
      isNot: (l, vs) => vs.every((v) => l !== v),
      contains: (l, vs) => vs.some((v) => l.includes(v)),
      doesNotContain: (l, vs) => vs.every((v) => !l.includes(v)),
      startsWith: (l, vs) => vs.some((v) => l.startsWith(v)),
      endsWith: (l, vs) => vs.some((v) => l.endsWith(v)),
    };
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...Object.keys(ops)), fc.array(value, { minLength: 1, maxLength: 3 }), async (op, values) => {
        const f = enc(JSON.stringify([{ name: 'properties.lit', operator: op, value: values }]));
        const a = await read(`/export/events?event=lit&limit=1000&includes=properties&filters=${f}`, readerA(), 'like-oracle');
        assert.equal(a.status, 200, a.text);
        const got = (a.json as { data: { properties: { lit: string } }[] }).data.map((e) => e.properties.lit).sort();
        const want = LIT.filter((l) => ops[op]!(l, values)).sort();
        assert.deepEqual(got, want, `${op} ${JSON.stringify(values)}`);
      }),
      { numRuns: runs(150), includeErrorInReport: true },
    );
    // The same on insights: a contains '%' filter keeps only sessions with a literal '%'.
    const pct = enc(JSON.stringify([{ name: 'properties.lit', operator: 'contains', value: ['%'] }]));
    const m = await read(`/insights/${A}/metrics?range=30d&filters=${pct}`, readerA(), 'like-oracle');
    assert.equal(m.status, 200);
    assert.equal((m.json as { metrics: { total_sessions: number } }).metrics.total_sessions, 1, 'the lit events are one session; it has a % value');
    const none = enc(JSON.stringify([{ name: 'properties.lit', operator: 'contains', value: ['%%%'] }]));
    const m2 = await read(`/insights/${A}/metrics?range=30d&filters=${none}`, readerA(), 'like-oracle');
    assert.equal((m2.json as { metrics: { total_sessions: number } }).metrics.total_sessions, 0, "'%%%' is matched literally, not as a wildcard");
  });
});
