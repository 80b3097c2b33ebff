// GET /export/events over HTTP (exportRoutes on the real Router/HttpServer, auth, rate-limit
// gate) against a generated dataset written straight into the tables. Expected pages are
// computed here in TypeScript from the generated rows, never by SQL.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { streamEvents } from '../internal/export/events';
import { parseEventsParams } from '../internal/export/params';
import { exportRoutes, type StreamingHttpResponse } from '../internal/export/routes';
import { createPool } from '../internal/store/db';
import { get, post, startApp, TestEnv, track, waitFor, type Credentials } from './support/harness';
import { mulberry32 } from './support/random';
import {
  eventRow,
  insertEvents,
  insertProfiles,
  startExportServer,
  type EventRow,
  type ExportServer,
  type ProfileRow,
} from './support/export-server';

const TZ = 'America/New_York';
const BASE = Date.UTC(2026, 2, 1, 3, 0, 0); // 2026-02-28 22:00 in New York

let env: TestEnv;
let server: ExportServer;
let projectA: string;
let projectB: string;
const readers: Credentials[] = [];
let root: Credentials;
let readerB: Credentials;
let writerA: Credentials;
let rowsA: EventRow[] = [];
let rowsB: EventRow[] = [];
const profiles = new Map<string, ProfileRow>();

let turn = 0;
/** Read clients of project A in turn: the tests make more than 100 requests per 10 s. */
const reader = () => readers[turn++ % readers.length]!;

// ---------------------------------------------------------------------------------------
// Dataset

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;

/** ISO with microseconds from ms + extra microseconds. */
const isoMicro = (ms: number, micro = 0) => `${new Date(ms).toISOString().slice(0, 23)}${String(micro).padStart(3, '0')}Z`;

function generate(projectId: string, seed: number, devices: number): EventRow[] {
  const rnd = mulberry32(seed);
  const rows: EventRow[] = [];
  for (let d = 0; d < devices; d++) {
    const deviceId = `dev${String(d).padStart(3, '0')}${projectId.slice(0, 4)}`;
    const profileId = d % 2 === 0 ? `user-${d}` : deviceId;
    const geo = pick(rnd, [
      { country: 'DE', region: 'Berlin', city: 'Berlin', latitude: 52.52, longitude: 13.4 },
      { country: 'US', region: 'New York', city: 'Brooklyn', latitude: 40.65, longitude: -73.95 },
      { country: '', region: '', city: '', latitude: null, longitude: null },
    ]);
    const tech = pick(rnd, [
      { device: 'desktop', browser: 'Chrome', browser_version: '124', os: 'macOS', os_version: '14', brand: 'Apple', model: 'Macintosh' },
      { device: 'mobile', browser: 'Safari', browser_version: '17', os: 'iOS', os_version: '17.4', brand: 'Apple', model: 'iPhone' },
    ]);
    const source = pick(rnd, [
      { referrer: 'https://www.google.com/', referrer_name: 'Google', referrer_type: 'search', utm_source: '', utm_medium: '', utm_campaign: '', utm_term: '', utm_content: '' },
      { referrer: '', referrer_name: '', referrer_type: '', utm_source: 'news', utm_medium: 'email', utm_campaign: 'spring', utm_term: 'shoes', utm_content: 'a' },
    ]);
    const isBot = d % 11 === 5;
    let t = BASE + Math.floor(rnd() * 9 * 86_400_000);
    const sessions = 1 + Math.floor(rnd() * 2);
    for (let s = 0; s < sessions; s++) {
      const sessionId = randomUUID();
      const common = {
        device_id: deviceId, profile_id: profileId, session_id: sessionId, ...geo, ...tech, ...source,
        is_bot: isBot, bot_reason: isBot ? 'ua:Googlebot' : null,
      };
      rows.push(eventRow(projectId, { ...common, name: 'session_start', created_at: isoMicro(t), received_at: isoMicro(t + 5) }));
      const n = 2 + Math.floor(rnd() * 5);
      for (let i = 0; i < n; i++) {
        const name = pick(rnd, ['screen_view', 'screen_view', 'click', 'purchase']);
        const props: Record<string, unknown> = { plan: pick(rnd, ['free', 'pro']) };
        if (name === 'purchase') props.price = Math.round(rnd() * 10000) / 100;
        rows.push(eventRow(projectId, {
          ...common, name, created_at: isoMicro(t, i === 1 ? 250 : 0), received_at: isoMicro(t + 40),
          properties: props, groups: rnd() < 0.3 ? ['acme', 'beta'] : [],
          origin: 'https://shop.example', path: pick(rnd, ['/', '/pricing', '/docs/a']), title: name === 'screen_view' ? 'Shop' : '',
          duration_ms: name === 'screen_view' ? 1000 + Math.floor(rnd() * 5000) : null,
        }));
        t += 1000 + Math.floor(rnd() * 120_000);
      }
      rows.push(eventRow(projectId, { ...common, name: 'session_end', created_at: isoMicro(t), received_at: isoMicro(t + 1800_000) }));
      t += 3 * 3600_000;
    }
  }
  // Ties: three events at the same instant (order decided by id), and two a microsecond apart.
  const tie = BASE + 4 * 86_400_000;
  for (let i = 0; i < 3; i++) rows.push(eventRow(projectId, { name: 'tie', created_at: isoMicro(tie) }));
  rows.push(eventRow(projectId, { name: 'tie', created_at: isoMicro(tie + 1, 1) }));
  rows.push(eventRow(projectId, { name: 'tie', created_at: isoMicro(tie + 1, 2) }));
  return rows;
}

// ---------------------------------------------------------------------------------------
// Expectations (independent of the implementation)

const newestFirst = (a: EventRow, b: EventRow) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1);
const msIso = (micro: string) => `${micro.slice(0, 23)}Z`;

type Include = 'profile' | 'meta' | 'properties' | 'geo' | 'device' | 'referrer';
const ALL_INCLUDES: Include[] = ['profile', 'meta', 'properties', 'geo', 'device', 'referrer'];

function expected(r: EventRow, includes: Include[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: r.id, name: r.name, deviceId: r.device_id, profileId: r.profile_id, sessionId: r.session_id, projectId: r.project_id,
    createdAt: msIso(r.created_at), path: r.path, origin: r.origin, title: r.title,
  };
  for (const inc of includes) {
    if (inc === 'profile') {
      const p = profiles.get(`${r.project_id}/${r.profile_id}`);
      out.profile = p ? { id: p.id, firstName: p.first_name, lastName: p.last_name, email: p.email, properties: p.properties, groups: p.groups } : null;
    }
    if (inc === 'meta') out.meta = { durationMs: r.duration_ms, isBot: r.is_bot, botReason: r.bot_reason, receivedAt: msIso(r.received_at) };
    if (inc === 'properties') Object.assign(out, { properties: r.properties, groups: r.groups });
    if (inc === 'geo') Object.assign(out, { country: r.country, region: r.region, city: r.city, latitude: r.latitude, longitude: r.longitude });
    if (inc === 'device') {
      Object.assign(out, { device: r.device, browser: r.browser, browserVersion: r.browser_version, os: r.os, osVersion: r.os_version, brand: r.brand, model: r.model });
    }
    if (inc === 'referrer') {
      Object.assign(out, {
        referrer: r.referrer, referrerName: r.referrer_name, referrerType: r.referrer_type, utmSource: r.utm_source,
        utmMedium: r.utm_medium, utmCampaign: r.utm_campaign, utmTerm: r.utm_term, utmContent: r.utm_content,
      });
    }
  }
  return out;
}

function matching(rows: EventRow[], pred: (r: EventRow) => boolean = () => true): EventRow[] {
  return rows.filter(pred).sort(newestFirst);
}

// ---------------------------------------------------------------------------------------
// HTTP helpers

function url(params: Record<string, string | number | string[] | object | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    if (Array.isArray(v) && k !== 'filters') for (const x of v) q.append(k, String(x));
    else q.set(k, typeof v === 'object' ? JSON.stringify(v) : String(v));
  }
  return `${server.url}/export/events?${q}`;
}

async function ok(params: Record<string, string | number | string[] | object | undefined>, creds: Credentials = reader()) {
  const res = await get(url(params), creds);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { meta: { count: number; totalCount: number; pages: number; current: number; cursor: string | null }; data: Record<string, unknown>[] };
}

async function bad(params: Record<string, string | number | string[] | object | undefined>, path: string[], creds: Credentials = reader()) {
  const res = await get(url(params), creds);
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.equal(res.body.error, 'Bad Request');
  assert.equal(typeof res.body.message, 'string');
  assert.ok(Array.isArray(res.body.details.issues));
  assert.ok(
    res.body.details.issues.some((i: { path: string[]; message: string }) => JSON.stringify(i.path) === JSON.stringify(path) && i.message.length > 0),
    `expected an issue at ${JSON.stringify(path)}: ${JSON.stringify(res.body)}`,
  );
  return res.body;
}

/** Every page by cursor: the ids in order, and each page's meta. */
async function walkByCursor(params: Record<string, string | number | string[] | object | undefined>, between?: (page: number) => Promise<void>) {
  const ids: string[] = [];
  const metas: { count: number; totalCount: number; pages: number; current: number }[] = [];
  let cursor: string | undefined;
  for (;;) {
    const body = await ok({ ...params, cursor });
    ids.push(...body.data.map((e) => e.id as string));
    const { cursor: next, ...meta } = body.meta;
    metas.push(meta);
    if (!next) break;
    cursor = next;
    await between?.(meta.current);
  }
  return { ids, metas };
}

// ---------------------------------------------------------------------------------------

before(async () => {
  env = await new TestEnv('export').setup();
  projectA = await env.project({ name: 'A', timezone: TZ });
  projectB = await env.project({ name: 'B', timezone: 'UTC' });
  for (let i = 0; i < 8; i++) readers.push(await env.client(projectA, 'read'));
  root = await env.client(projectB, 'root');
  readerB = await env.client(projectB, 'read');
  writerA = await env.client(projectA, 'write');
  rowsA = generate(projectA, 7, 60);
  rowsB = generate(projectB, 8, 5);
  await insertEvents(env.db, [...rowsA, ...rowsB]);
  const profileRows: ProfileRow[] = [];
  for (const r of rowsA) {
    const id = r.profile_id;
    if (!id.startsWith('user-') || Number(id.slice(5)) % 4 !== 0 || profiles.has(`${projectA}/${id}`)) continue;
    const p: ProfileRow = {
      project_id: projectA, id, first_name: `F${id}`, last_name: id.endsWith('8') ? null : `L${id}`, email: `${id}@example.com`,
      properties: { visits: Number(id.slice(5)), tier: 'gold' }, groups: ['acme'],
    };
    profiles.set(`${projectA}/${id}`, p);
    profileRows.push(p);
  }
  await insertProfiles(env.db, profileRows);
  await env.db.query('ANALYZE');
  server = await startExportServer(env);
});

after(async () => {
  await server?.close();
  await env?.teardown();
});

describe('GET /export/events', () => {
  it('first page: newest first, base fields only, meta', async () => {
    const all = matching(rowsA);
    const body = await ok({ projectId: projectA });
    assert.deepEqual(body.data, all.slice(0, 50).map((r) => expected(r)));
    assert.equal(body.meta.count, 50);
    assert.equal(body.meta.totalCount, all.length);
    assert.equal(body.meta.pages, Math.ceil(all.length / 50));
    assert.equal(body.meta.current, 1);
    assert.equal(typeof body.meta.cursor, 'string');
    assert.deepEqual(Object.keys(body.data[0]!), ['id', 'name', 'deviceId', 'profileId', 'sessionId', 'projectId', 'createdAt', 'path', 'origin', 'title']);
  });

  it('a read client may omit projectId (its own project); project_id is accepted', async () => {
    const all = matching(rowsA);
    assert.deepEqual((await ok({ limit: 5 })).data, all.slice(0, 5).map((r) => expected(r)));
    assert.deepEqual((await ok({ project_id: projectA, limit: 5 })).data, all.slice(0, 5).map((r) => expected(r)));
  });

  it('a root client reads any project and must name it', async () => {
    const body = await ok({ projectId: projectA, limit: 3 }, root);
    assert.deepEqual(body.data, matching(rowsA).slice(0, 3).map((r) => expected(r)));
    const own = await ok({ projectId: projectB, limit: 1000 }, root);
    assert.deepEqual(own.data, matching(rowsB).map((r) => expected(r)));
    await bad({ limit: 3 }, ['projectId'], root);
  });

  for (const inc of ALL_INCLUDES) {
    it(`includes=${inc} adds exactly its fields`, async () => {
      const all = matching(rowsA);
      const body = await ok({ includes: inc, limit: 1000 });
      assert.deepEqual(body.data, all.slice(0, 1000).map((r) => expected(r, [inc])));
    });
  }

  it('all includes at once, repeated and comma-separated', async () => {
    const all = matching(rowsA);
    const body = await ok({ includes: ['profile,meta', 'properties', 'geo,device,referrer'], limit: 200, page: 2 });
    assert.deepEqual(body.data, all.slice(200, 400).map((r) => expected(r, ALL_INCLUDES)));
    const withProfile = body.data.filter((e) => e.profile !== null);
    assert.ok(withProfile.length > 0 && withProfile.length < body.data.length, 'some events have a profile row, some not');
  });

  it('includes also takes single event columns, by column or field name, as top-level fields', async () => {
    const all = matching(rowsA).slice(0, 300);
    const body = await ok({ includes: 'region,city,groups,os_version,referrerName,received_at,isBot,durationMs,name', limit: 300 });
    assert.deepEqual(body.data, all.map((r) => ({
      ...expected(r),
      region: r.region, city: r.city, groups: r.groups, osVersion: r.os_version, referrerName: r.referrer_name,
      receivedAt: msIso(r.received_at), isBot: r.is_bot, durationMs: r.duration_ms,
    })));
    // a group and one of its columns: the group's fields, once
    const geo = await ok({ includes: 'geo,city,latitude', limit: 5 });
    assert.deepEqual(geo.data, all.slice(0, 5).map((r) => expected(r, ['geo'])));
    await bad({ includes: 'region,nope' }, ['includes', '1']);
  });

  it('session_start/session_end and bots are included; bots carry meta.isBot', async () => {
    const all = matching(rowsA);
    const body = await ok({ includes: 'meta', limit: 1000 });
    const names = new Set(body.data.map((e) => e.name));
    assert.ok(names.has('session_start') && names.has('session_end'));
    const bots = body.data.filter((e) => (e.meta as { isBot: boolean }).isBot);
    assert.equal(bots.length, all.slice(0, 1000).filter((r) => r.is_bot).length);
    assert.ok(bots.length > 0);
    assert.ok(bots.every((e) => (e.meta as { botReason: string }).botReason === 'ua:Googlebot'));
  });

  it('event: one name, several (repeated or comma-separated)', async () => {
    assert.deepEqual((await ok({ event: 'purchase', limit: 1000 })).data, matching(rowsA, (r) => r.name === 'purchase').map((r) => expected(r)));
    const want = matching(rowsA, (r) => r.name === 'click' || r.name === 'session_end').map((r) => expected(r));
    assert.deepEqual((await ok({ event: 'click,session_end', limit: 1000 })).data, want);
    assert.deepEqual((await ok({ event: ['click', 'session_end'], limit: 1000 })).data, want);
    assert.deepEqual((await ok({ event: 'nothing' })).meta, { count: 0, totalCount: 0, pages: 0, current: 1, cursor: null });
  });

  it('profileId', async () => {
    const want = matching(rowsA, (r) => r.profile_id === 'user-4');
    assert.ok(want.length > 0);
    assert.deepEqual((await ok({ profileId: 'user-4', includes: 'profile' })).data, want.map((r) => expected(r, ['profile'])));
  });

  it('start/end dates are days in the project timezone, end inclusive', async () => {
    // 2026-03-03 in New York = [05:00Z on the 3rd, 05:00Z on the 5th) for start=03, end=04.
    const want = matching(rowsA, (r) => r.created_at >= '2026-03-03T05:00:00.000000Z' && r.created_at < '2026-03-05T05:00:00.000000Z');
    assert.ok(want.length > 0);
    const body = await ok({ start: '2026-03-03', end: '2026-03-04', limit: 1000 });
    assert.deepEqual(body.data, want.map((r) => expected(r)));
    // Across the DST change (2026-03-08 has 23 hours in New York): ends at 04:00Z on the 9th.
    const dst = matching(rowsA, (r) => r.created_at >= '2026-03-08T05:00:00.000000Z' && r.created_at < '2026-03-09T04:00:00.000000Z');
    assert.deepEqual((await ok({ start: '2026-03-08', end: '2026-03-08', limit: 1000 })).data, dst.map((r) => expected(r)));
  });

  it('start/end date-times: with Z, with an offset, and local wall time; end inclusive', async () => {
    const tieRows = matching(rowsA, (r) => r.name === 'tie');
    const exact = tieRows[tieRows.length - 1]!.created_at; // the three identical instants
    const body = await ok({ event: 'tie', start: exact, end: exact });
    assert.deepEqual(body.data, tieRows.filter((r) => r.created_at === exact).map((r) => expected(r)));
    assert.equal(body.data.length, 3);
    // Microseconds are honoured: the two rows 1 µs apart are split by an instant bound.
    const micro = tieRows[0]!.created_at; // the newest, ...002Z
    assert.deepEqual((await ok({ event: 'tie', start: micro })).data, [expected(tieRows[0]!)]);
    const from = '2026-03-04T08:00:00-05:00';
    const wantFrom = matching(rowsA, (r) => r.created_at >= '2026-03-04T13:00:00.000000Z');
    assert.deepEqual((await ok({ start: from, limit: 1000 })).data, wantFrom.slice(0, 1000).map((r) => expected(r)));
    // No offset: New York wall time (EST, UTC-5, on March 4th).
    assert.deepEqual((await ok({ start: '2026-03-04T08:00:00', limit: 1000 })).data, wantFrom.slice(0, 1000).map((r) => expected(r)));
    const until = matching(rowsA, (r) => r.created_at <= '2026-03-02T00:00:00.000000Z');
    assert.deepEqual((await ok({ end: '2026-03-02T00:00:00Z', limit: 1000 })).data, until.map((r) => expected(r)));
  });

  it('filters: columns and properties, same operators as insights', async () => {
    const f1 = [{ name: 'country', operator: 'is', value: ['DE'] }, { name: 'properties.plan', operator: 'is', value: ['pro'] }];
    const w1 = matching(rowsA, (r) => r.country === 'DE' && r.properties.plan === 'pro');
    assert.ok(w1.length > 0);
    assert.deepEqual((await ok({ filters: f1, limit: 1000 })).data, w1.map((r) => expected(r)));
    const f2 = [{ name: 'path', operator: 'startsWith', value: ['/docs'] }, { name: 'browser', operator: 'isNot', value: ['Safari'] }];
    const w2 = matching(rowsA, (r) => r.path.startsWith('/docs') && r.browser !== 'Safari');
    assert.deepEqual((await ok({ filters: f2, limit: 1000 })).data, w2.map((r) => expected(r)));
    const f3 = [{ name: 'name', operator: 'regex', value: ['^(click|purchase)$'] }, { name: 'utm_source', operator: 'contains', value: ['ew'] }];
    const w3 = matching(rowsA, (r) => (r.name === 'click' || r.name === 'purchase') && r.utm_source.includes('ew'));
    assert.deepEqual((await ok({ filters: f3, event: 'click,purchase,screen_view', limit: 1000 })).data, w3.map((r) => expected(r)));
  });

  it('pagination by page number: every page, the last page, past the end', async () => {
    const all = matching(rowsA);
    const limit = 37;
    const pages = Math.ceil(all.length / limit);
    const ids: string[] = [];
    for (let page = 1; page <= pages; page++) {
      const body = await ok({ limit, page });
      assert.equal(body.meta.current, page);
      assert.equal(body.meta.totalCount, all.length);
      assert.equal(body.meta.pages, pages);
      assert.equal(body.meta.count, page < pages ? limit : all.length - (pages - 1) * limit);
      assert.equal(body.meta.cursor === null, page === pages, 'no cursor on the last page only');
      ids.push(...body.data.map((e) => e.id as string));
    }
    assert.deepEqual(ids, all.map((r) => r.id));
    const past = await ok({ limit, page: pages + 1 });
    assert.deepEqual(past, { meta: { count: 0, totalCount: all.length, pages, current: pages + 1, cursor: null }, data: [] });
  });

  it('pagination by cursor gives the same rows; a page=N cursor continues by keyset', async () => {
    const all = matching(rowsA);
    const walk = await walkByCursor({ limit: 50, includes: 'geo' });
    assert.deepEqual(walk.ids, all.map((r) => r.id));
    assert.deepEqual(walk.metas.map((m) => m.current), walk.metas.map((_, i) => i + 1));
    assert.ok(walk.metas.every((m) => m.totalCount === all.length && m.pages === Math.ceil(all.length / 50)));
    const page3 = await ok({ limit: 50, page: 3 });
    const page4 = await ok({ limit: 50, cursor: page3.meta.cursor!, page: 4 });
    assert.equal(page4.meta.current, 4);
    assert.deepEqual(page4.data, all.slice(150, 200).map((r) => expected(r)));
  });

  it('the cursor walk is a snapshot: newer events arriving between pages are neither shown nor shift pages', async () => {
    const projectC = await env.project({ name: 'C', timezone: 'UTC' });
    const readerC = await env.client(projectC, 'read');
    const rowsC = generate(projectC, 11, 12);
    await insertEvents(env.db, rowsC);
    const snapshot = matching(rowsC).map((r) => r.id);
    const arrived: EventRow[] = [];
    let cursor: string | undefined;
    const seen: string[] = [];
    for (;;) {
      const res = await get(url({ limit: 10, cursor }), readerC);
      assert.equal(res.status, 200);
      seen.push(...res.body.data.map((e: { id: string }) => e.id));
      assert.equal(res.body.meta.totalCount, snapshot.length);
      if (!res.body.meta.cursor) break;
      cursor = res.body.meta.cursor;
      // Newer than everything so far (a live site keeps sending events).
      const fresh = [0, 1, 2].map((i) => eventRow(projectC, { name: 'live', created_at: isoMicro(Date.UTC(2026, 3, 1) + seen.length * 10 + i) }));
      arrived.push(...fresh);
      await insertEvents(env.db, fresh);
    }
    assert.ok(arrived.length >= 9);
    assert.deepEqual(seen, snapshot, 'no event skipped or repeated');
    // A new walk starts from the new newest event.
    const res = await get(url({ limit: 1000 }), readerC);
    assert.equal(res.body.meta.totalCount, snapshot.length + arrived.length);
  });

  it('a cursor belongs to its query', async () => {
    const first = await ok({ limit: 10, event: 'click' });
    await bad({ limit: 10, event: 'purchase', cursor: first.meta.cursor! }, ['cursor']);
    await bad({ limit: 11, event: 'click', cursor: first.meta.cursor! }, ['cursor']);
    await bad({ limit: 10, event: 'click', cursor: first.meta.cursor!, page: 5 }, ['page']);
    await bad({ cursor: 'not-a-cursor' }, ['cursor']);
    // The cursor of project A is no use for project B either.
    const res = await get(url({ projectId: projectB, limit: 10, event: 'click', cursor: first.meta.cursor! }), root);
    assert.equal(res.status, 400);
  });

  it('400 for every bad parameter, with the issues body', async () => {
    await bad({ limit: 1001 }, ['limit']);
    await bad({ limit: 0 }, ['limit']);
    await bad({ page: 0 }, ['page']);
    await bad({ page: 'x' }, ['page']);
    await bad({ includes: 'profile,friends' }, ['includes', '1']);
    await bad({ start: '2026-02-30' }, ['start']);
    await bad({ end: 'tomorrow' }, ['end']);
    await bad({ start: '2026-03-05', end: '2026-03-04' }, ['end']);
    await bad({ start: '2026-03-05T10:00:00Z', end: '2026-03-04' }, ['end']);
  });

  it('400: filters as in insights; mixed start/end checked in the project timezone', async () => {
    await bad({ filters: 'not json' }, ['filters']);
    await bad({ filters: [{ name: 'colour', operator: 'is', value: ['x'] }] }, ['filters', '0', 'name']);
    await bad({ filters: [{ name: 'path', operator: 'matches', value: ['x'] }] }, ['filters', '0', 'operator']);
    await bad({ filters: [{ name: 'path', operator: 'regex', value: ['('] }] }, ['filters', '0', 'value', '0']);
    await bad({ format: 'csv' }, ['format']);
    await bad({ start: '2026-03-06', end: '2026-03-05T23:00:00Z' }, ['end']); // the 6th starts at 05:00Z in New York
  });

  it('auth: read client of another project 403, write client 403, no credentials 401, unknown project 404', async () => {
    const other = await get(url({ projectId: projectB }), reader());
    assert.equal(other.status, 403);
    assert.deepEqual(Object.keys(other.body).sort(), ['error', 'message']);
    assert.equal(other.body.error, 'Forbidden');
    const write = await get(url({ projectId: projectA }), writerA);
    assert.equal(write.status, 403);
    assert.deepEqual(Object.keys(write.body).sort(), ['error', 'message']);
    const none = await get(url({ projectId: projectA }), null);
    assert.equal(none.status, 401);
    const wrongB = await get(url({ projectId: projectA }), readerB);
    assert.equal(wrongB.status, 403);
    const unknown = await get(url({ projectId: 'no-such-project' }), root);
    assert.equal(unknown.status, 404);
  });

  it('rate limit headers on every answer', async () => {
    const res = await get(url({ limit: 1 }), reader());
    assert.equal(res.headers.get('x-ratelimit-limit'), '100');
    assert.ok(Number(res.headers.get('x-ratelimit-remaining')) < 100);
    assert.ok(Number(res.headers.get('x-ratelimit-reset')) >= 1);
    const badRes = await get(url({ limit: 5000 }), reader());
    assert.equal(badRes.status, 400);
    assert.equal(badRes.headers.get('x-ratelimit-limit'), '100');
  });

  it('format=ndjson: every matching event, one per line, same order and shape', async () => {
    const res = await fetch(url({ format: 'ndjson', includes: 'meta,properties', event: 'screen_view,purchase', limit: 3, page: 2 }), {
      headers: { 'service-client-id': readers[0]!.clientId, 'service-client-secret': readers[0]!.clientSecret },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/x-ndjson');
    const text = await res.text();
    assert.ok(text.endsWith('\n'));
    const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l));
    const want = matching(rowsA, (r) => r.name === 'screen_view' || r.name === 'purchase').map((r) => expected(r, ['meta', 'properties']));
    assert.deepEqual(lines, want, 'page and limit are ignored');
    const empty = await fetch(url({ format: 'ndjson', event: 'nothing' }), {
      headers: { 'service-client-id': readers[1]!.clientId, 'service-client-secret': readers[1]!.clientSecret },
    });
    assert.equal(await empty.text(), '');
    await bad({ format: 'ndjson', filters: [{ name: 'path', operator: 'regex', value: ['[z-a]'] }] }, ['filters', '0', 'value', '0']);
  });

  it('NDJSON: buffered bodies are capped (400); with streaming on the route hands the chunks to the server', async () => {
    const small = await startExportServer(env, { maxBufferedBytes: 2000 });
    try {
      const res = await get(`${small.url}/export/events?format=ndjson`, reader());
      assert.equal(res.status, 400);
      assert.deepEqual(res.body.details.issues[0].path, ['format']);
      assert.equal(res.headers.get('x-ratelimit-limit'), '100');
    } finally {
      await small.close();
    }
    const route = exportRoutes(server.deps, { streaming: true }).find((r) => r.pattern === '/export/events')!;
    const creds = reader();
    const res = (await route.handler({
      method: 'GET', path: '/export/events', params: {}, query: new URLSearchParams('format=ndjson&event=purchase'),
      headers: { 'service-client-id': creds.clientId, 'service-client-secret': creds.clientSecret },
      body: Buffer.alloc(0), remoteAddress: '127.0.0.1', requestId: 'test',
    })) as StreamingHttpResponse;
    assert.equal(res.status, 200);
    assert.equal(res.body, undefined);
    assert.equal(res.raw, undefined);
    assert.equal(res.stream?.contentType, 'application/x-ndjson');
    assert.equal(res.headers?.['X-RateLimit-Limit'], '100');
    let text = '';
    for await (const chunk of res.stream!.chunks) text += chunk;
    assert.deepEqual(text.trimEnd().split('\n').map((l) => JSON.parse(l)), matching(rowsA, (r) => r.name === 'purchase').map((r) => expected(r)));
  });

  it('the NDJSON stream reads in batches and releases its connection when stopped early', async () => {
    const pool = createPool(env.databaseUrl, 1);
    try {
      const params = parseEventsParams(new URLSearchParams('includes=profile'));
      const chunks: string[] = [];
      for await (const chunk of await streamEvents(pool, projectA, params, { batchSize: 100 })) chunks.push(chunk);
      const all = matching(rowsA);
      assert.equal(chunks.length, Math.ceil(all.length / 100));
      assert.ok(chunks.every((c, i) => c.split('\n').length - 1 === (i < chunks.length - 1 ? 100 : all.length - 100 * (chunks.length - 1))));
      assert.deepEqual(chunks.join('').trimEnd().split('\n').map((l) => JSON.parse(l)), all.map((r) => expected(r, ['profile'])));
      // Stop after the first batch: the only connection must be back in the pool.
      for await (const chunk of await streamEvents(pool, projectA, params, { batchSize: 10 })) {
        assert.ok(chunk.length > 0);
        break;
      }
      const res = await Promise.race([
        pool.query('SELECT 1 AS one'),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('connection not released')), 3000)),
      ]);
      assert.equal(res.rows[0].one, 1);
    } finally {
      await pool.end();
    }
  });

  it('events from the real pipeline (/track): session rows, meta, title, profile', async () => {
    const pipeEnv = await new TestEnv('exportpipe').setup();
    const app = await startApp(pipeEnv);
    const pipeServer = await startExportServer(pipeEnv);
    try {
      const projectId = await pipeEnv.project({ timezone: 'Europe/Berlin' });
      const writer = await pipeEnv.client(projectId, 'write');
      const rd = await pipeEnv.client(projectId, 'read');
      const o = { ip: '81.2.69.142', userAgent: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36' };
      assert.equal((await post(`${app.url}/track`, { type: 'identify', payload: { profileId: 'u1', firstName: 'Ada', lastName: 'L', email: 'ada@example.com', properties: { a: 1 } } }, writer, o)).status, 202);
      const t0 = Date.now() - 60_000;
      for (const [i, path] of ['/a', '/b'].entries()) {
        const sent = await post(`${app.url}/track`, track('screen_view', { __path: `https://shop.example${path}?utm_source=news`, __title: `T${i}`, __timestamp: new Date(t0 + i * 5000).toISOString(), plan: 'pro' }, { profileId: 'u1', groups: ['g1'] }), writer, o);
        assert.equal(sent.status, 202);
      }
      await waitFor(async () => (await pipeEnv.db.query("SELECT count(*)::int AS n FROM events WHERE name = 'screen_view' AND duration_ms IS NOT NULL")).rows[0].n === 1, { what: 'pipeline' });
      const res = await get(`${pipeServer.url}/export/events?includes=profile,meta,properties,referrer&limit=10`, rd);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const names = res.body.data.map((e: { name: string }) => e.name);
      // session_start shares its first event's time; ties are ordered by id.
      assert.deepEqual(names.filter((n: string) => n !== 'session_end').sort(), ['screen_view', 'screen_view', 'session_start']);
      assert.equal(names[0], 'screen_view');
      const [second, first] = res.body.data.filter((e: { name: string }) => e.name === 'screen_view');
      assert.equal(first.path, '/a');
      assert.equal(first.title, 'T0');
      assert.equal(first.origin, 'https://shop.example');
      assert.equal(first.meta.durationMs, 5000);
      assert.equal(second.meta.durationMs, null);
      assert.equal(first.meta.isBot, false);
      assert.deepEqual(first.properties, { plan: 'pro' });
      assert.deepEqual(first.groups, ['g1']);
      assert.equal(first.utmSource, 'news');
      assert.deepEqual(first.profile, { id: 'u1', firstName: 'Ada', lastName: 'L', email: 'ada@example.com', properties: { a: 1 }, groups: [] });
      assert.equal(first.createdAt, new Date(t0).toISOString());
    } finally {
      await pipeServer.close();
      await app.drain();
      await pipeEnv.teardown();
    }
  });
});
