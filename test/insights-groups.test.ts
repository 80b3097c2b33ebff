// OpenPanel's groups/types, groups and groups/{groupId} over seeded groups and profiles (the rows
// /track `group` and `assign_group` write): types, search, members, an unknown group's 404 with a
// JSON body, no other project's groups or members, 400s naming the parameter.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents } from './support/export-server';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string;
let projectB: string;
let readA: Credentials;
let rootA: Credentials;
let readB: Credentials;

const DEVICE = '0123456789abcdef0123456789abcdef';
const at = (day: number) => `2026-01-${String(day).padStart(2, '0')}T10:00:00.000Z`;

async function seedGroup(project: string, id: string, type: string, name: string, properties: Record<string, unknown>, day: number) {
  await env.db.query(
    'INSERT INTO groups (project_id, id, type, name, properties, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [project, id, type, name, JSON.stringify(properties), at(day), at(day + 1)],
  );
}

async function seedProfile(project: string, id: string, groups: string[], day: number, over: { email?: string; first?: string; last?: string; properties?: Record<string, unknown> } = {}) {
  await env.db.query(
    `INSERT INTO profiles (project_id, id, first_name, last_name, email, properties, groups, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [project, id, over.first ?? null, over.last ?? null, over.email ?? null, JSON.stringify(over.properties ?? {}), groups, at(day), at(day + 2)],
  );
}

before(async () => {
  env = await new TestEnv('groups').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A' });
  projectB = await env.project({ name: 'B' });
  [readA, rootA, readB] = await Promise.all([env.client(projectA, 'read'), env.client(projectA, 'root'), env.client(projectB, 'read')]);
  await seedGroup(projectA, 'g-acme', 'company', 'Acme Inc', { plan: 'pro', address: { city: 'Berlin' } }, 1);
  await seedGroup(projectA, 'g-beta', 'company', 'Beta LLC', {}, 2);
  await seedGroup(projectA, 't-red', 'team', 'Red Team', {}, 3);
  await seedGroup(projectA, 'a/b', 'team', '100% Blue', {}, 4);
  await seedGroup(projectB, 'g-acme', 'company', 'Other Acme', {}, 5);
  await seedGroup(projectB, 'v-1', 'vendor', 'Vendor', {}, 6);
  await seedProfile(projectA, 'u1', ['g-acme', 't-red'], 1, { email: 'u1@a.test', first: 'Ann', last: 'One', properties: { avatar: 'https://a.test/u1.png', tier: 'gold' } });
  await seedProfile(projectA, 'u2', ['g-acme'], 2);
  await seedProfile(projectA, DEVICE, ['g-acme'], 3); // assign_group without a profileId: the device id
  await seedProfile(projectA, 'u4', [], 4);
  await seedProfile(projectB, 'u9', ['g-acme'], 5);
  // u1's latest event (the bot's, its session_end and project B's are not activity)
  await insertEvents(env.db, [
    eventRow(projectA, { name: 'signup', profile_id: 'u1', created_at: '2026-02-01T08:00:00.000Z' }),
    eventRow(projectA, { name: 'session_end', profile_id: 'u1', created_at: '2026-02-01T09:00:00.000Z' }),
    eventRow(projectA, { name: 'click', profile_id: 'u1', created_at: '2026-02-02T08:00:00.000Z', is_bot: true }),
    eventRow(projectB, { name: 'click', profile_id: 'u1', created_at: '2026-02-03T08:00:00.000Z' }),
  ]);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const url = (project: string, route: string, query: Record<string, string> = {}) =>
  `${app.url}/insights/${project}/${route}${Object.keys(query).length ? `?${new URLSearchParams(query)}` : ''}`;

const group = (project: string, id: string, type: string, name: string, day: number, properties: Record<string, unknown> = {}) => ({
  id, projectId: project, type, name, properties, createdAt: at(day), updatedAt: at(day + 1),
});

test('groups/types: the distinct types of the project, by name', async () => {
  const a = await get(url(projectA, 'groups/types'), readA);
  assert.equal(a.status, 200, JSON.stringify(a.body));
  assert.deepEqual(a.body, { types: ['company', 'team'] });
  assert.deepEqual((await get(url(projectB, 'groups/types'), readB)).body, { types: ['company', 'vendor'] });
});

test('groups: newest first, by type, by search (name or id, case-insensitive), limit', async () => {
  const acme = group(projectA, 'g-acme', 'company', 'Acme Inc', 1, { plan: 'pro', address: { city: 'Berlin' } });
  const beta = group(projectA, 'g-beta', 'company', 'Beta LLC', 2);
  const red = group(projectA, 't-red', 'team', 'Red Team', 3);
  const blue = group(projectA, 'a/b', 'team', '100% Blue', 4);
  const ask = async (query: Record<string, string>) => {
    const r = await get(url(projectA, 'groups', query), readA);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };
  assert.deepEqual(await ask({}), [blue, red, beta, acme]);
  assert.deepEqual(await ask({ type: 'company' }), [beta, acme]);
  assert.deepEqual(await ask({ type: '' }), [blue, red, beta, acme]);
  assert.deepEqual(await ask({ type: 'vendor' }), []); // project B's type
  assert.deepEqual(await ask({ search: 'ACME' }), [acme]);
  assert.deepEqual(await ask({ search: 't-' }), [red]); // in the id
  assert.deepEqual(await ask({ search: '%' }), [blue]); // taken literally
  assert.deepEqual(await ask({ search: 'team', type: 'company' }), []);
  assert.deepEqual(await ask({ limit: '2' }), [blue, red]);
  const b = await get(url(projectB, 'groups'), readB);
  assert.deepEqual(b.body, [group(projectB, 'v-1', 'vendor', 'Vendor', 6), group(projectB, 'g-acme', 'company', 'Other Acme', 5)]);
});

test('groups/{groupId}: the group, its member count and its members, newest first', async () => {
  const r = await get(url(projectA, 'groups/g-acme'), readA);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.group, group(projectA, 'g-acme', 'company', 'Acme Inc', 1, { plan: 'pro', address: { city: 'Berlin' } }));
  assert.equal(r.body.member_count, 3); // u1, u2 and the device's profile; not u4, not project B's u9
  assert.deepEqual(r.body.members, [
    {
      id: DEVICE, email: '', avatar: '', firstName: '', lastName: '', createdAt: at(3), lastSeenAt: at(5),
      isExternal: false, projectId: projectA, groups: ['g-acme'], properties: {},
    },
    {
      id: 'u2', email: '', avatar: '', firstName: '', lastName: '', createdAt: at(2), lastSeenAt: at(4),
      isExternal: true, projectId: projectA, groups: ['g-acme'], properties: {},
    },
    {
      // lastSeenAt: its latest real event (not the bot's, not session_end, not project B's)
      id: 'u1', email: 'u1@a.test', avatar: 'https://a.test/u1.png', firstName: 'Ann', lastName: 'One', createdAt: at(1),
      lastSeenAt: '2026-02-01T08:00:00.000Z', isExternal: true, projectId: projectA, groups: ['g-acme', 't-red'],
      properties: { avatar: 'https://a.test/u1.png', tier: 'gold' },
    },
  ]);
  const two = await get(url(projectA, 'groups/g-acme', { memberLimit: '2' }), rootA);
  assert.equal(two.body.member_count, 3);
  assert.deepEqual(two.body.members.map((m: { id: string }) => m.id), [DEVICE, 'u2']);
  const red = await get(url(projectA, 'groups/t-red'), readA);
  assert.equal(red.body.member_count, 1);
  assert.deepEqual(red.body.members.map((m: { id: string }) => m.id), ['u1']);
  // an id holding a slash, encoded in the path; a group without members
  const blue = await get(url(projectA, `groups/${encodeURIComponent('a/b')}`), readA);
  assert.equal(blue.status, 200, JSON.stringify(blue.body));
  assert.deepEqual(blue.body, { group: group(projectA, 'a/b', 'team', '100% Blue', 4), member_count: 0, members: [] });
  // project B's group of the same id: its own name and member
  const b = await get(url(projectB, 'groups/g-acme'), readB);
  assert.equal(b.body.group.name, 'Other Acme');
  assert.deepEqual(b.body.members.map((m: { id: string }) => m.id), ['u9']);
});

test('groups/{groupId}: an unknown group, or another project\'s, is a 404 with a JSON body', async () => {
  for (const id of ['nope', 'v-1']) {
    const r = await get(url(projectA, `groups/${id}`), readA);
    assert.equal(r.status, 404, id);
    assert.equal(r.body.error, 'Not Found');
    assert.match(r.body.message, new RegExp(id));
  }
  // an unknown project is a 404 too
  const p = await get(url('no-such-project', 'groups/g-acme'), rootA);
  assert.equal(p.status, 404);
  assert.deepEqual(Object.keys(p.body).sort(), ['error', 'message']);
});

test('bad parameters: 400 naming the parameter; auth before parameters', async () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['groups', { limit: '101' }, 'limit'],
    ['groups', { limit: '0' }, 'limit'],
    ['groups', { limit: 'ten' }, 'limit'],
    ['groups', { search: 's'.repeat(2001) }, 'search'],
    ['groups', { type: 'a\u0000' }, 'type'],
    ['groups/g-acme', { memberLimit: '51' }, 'memberLimit'],
    ['groups/g-acme', { memberLimit: '-1' }, 'memberLimit'],
    ['groups/a%00b', {}, 'groupId'],
  ];
  for (const [route, query, param] of cases) {
    const r = await get(url(projectA, route, query), readA);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(query).slice(0, 60)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), JSON.stringify(r.body));
  }
  for (const route of ['groups/types', 'groups', 'groups/g-acme']) {
    assert.equal((await get(url(projectA, route, { limit: '999' }), null)).status, 401, route);
    assert.equal((await get(url(projectA, route), readB)).status, 403, route);
  }
});
