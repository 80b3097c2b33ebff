import assert from 'node:assert/strict';
import { test } from 'node:test';
import type pg from 'pg';
import { AbortedWaitError, admittedSource, ClientLimiter, ClientQueueFullError, isTransactionControl, ReadCost, Slots } from './admission';

const tick = () => new Promise((r) => setImmediate(r));

test('Slots: at most limit holders, the rest in arrival order', async () => {
  const s = new Slots(2);
  const a = await s.acquire();
  const b = await s.acquire();
  const order: string[] = [];
  const c = s.acquire().then((r) => (order.push('c'), r));
  const d = s.acquire().then((r) => (order.push('d'), r));
  await tick();
  assert.equal(s.running, 2);
  assert.equal(s.waiting, 2);
  a();
  a(); // idempotent: gives back one slot only
  await tick();
  assert.deepEqual(order, ['c']);
  b();
  await tick();
  assert.deepEqual(order, ['c', 'd']);
  assert.equal(s.running, 2);
  (await c)();
  (await d)();
  assert.equal(s.running, 0);
  assert.equal(s.waiting, 0);
});

test('Slots: an aborted waiter leaves the queue and never gets the slot', async () => {
  const s = new Slots(1);
  const held = await s.acquire();
  const ac = new AbortController();
  const dropped = s.acquire(ac.signal);
  const next = s.acquire();
  ac.abort();
  await assert.rejects(dropped, AbortedWaitError);
  assert.equal(s.waiting, 1);
  held();
  const r = await next;
  assert.equal(s.running, 1);
  r();
  assert.equal(s.running, 0);
  // Already aborted: rejects at once with the caller's error, nothing queued.
  await assert.rejects(s.acquire(AbortSignal.abort(), () => new Error('gone')), /gone/);
  assert.equal(s.waiting, 0);
});

test('ClientLimiter: per client, a bounded queue, then ClientQueueFullError; other clients unaffected', async () => {
  const l = new ClientLimiter(2, 1);
  const a1 = await l.enter('a');
  const a2 = await l.enter('a');
  const a3 = l.enter('a'); // queued
  await assert.rejects(l.enter('a'), (e: unknown) => e instanceof ClientQueueFullError && e.limit === 2);
  const b1 = await l.enter('b');
  a1();
  const r3 = await a3;
  a2();
  r3();
  b1();
  assert.equal(l.size, 0, 'clients with nothing in flight are forgotten');
});

test('ClientLimiter: an aborted queued read frees its queue place', async () => {
  const l = new ClientLimiter(1, 1);
  const a1 = await l.enter('a');
  const ac = new AbortController();
  const q = l.enter('a', ac.signal);
  ac.abort();
  await assert.rejects(q, AbortedWaitError);
  const q2 = l.enter('a');
  a1();
  (await q2)();
  assert.equal(l.size, 0);
});

test('isTransactionControl', () => {
  for (const t of ['BEGIN READ ONLY', 'COMMIT', 'ROLLBACK', "SELECT set_config('statement_timeout', $1, true)", 'SET LOCAL jit = off']) assert.ok(isTransactionControl(t), t);
  for (const t of ['SELECT 1', 'WITH x AS (SELECT 1) SELECT * FROM x', 'select settings']) assert.ok(!isTransactionControl(t), t);
});

test('admittedSource: statements wait for a slot, transaction control does not, release restores the client', async () => {
  const log: string[] = [];
  let finish: (() => void) | null = null;
  const fake = {
    query: (text: string) => {
      log.push(text);
      if (text === 'SLOW') return new Promise((r) => (finish = () => r({ rows: [] })));
      return Promise.resolve({ rows: [] });
    },
    release: () => log.push('released'),
  };
  const originalQuery = fake.query;
  const pool = { connect: async () => fake as unknown as pg.PoolClient };
  const slots = new Slots(1);
  const ac = new AbortController();
  const src = admittedSource(pool, slots, () => ac.signal, () => new Error('client gone'));
  const c1 = await src.connect();
  const slow = c1.query('SLOW');
  await tick();
  assert.equal(slots.running, 1);
  // Same fake client object twice is fine for the test: the second wrapper sees the first's query.
  const other = admittedSource({ connect: async () => ({ query: originalQuery, release: () => {} }) as unknown as pg.PoolClient }, slots, () => ac.signal, () => new Error('client gone'));
  const c2 = await other.connect();
  await c2.query('BEGIN READ ONLY'); // no slot needed
  const waiting = c2.query('SELECT 2');
  await tick();
  assert.equal(slots.waiting, 1);
  assert.ok(!log.includes('SELECT 2'));
  ac.abort();
  await assert.rejects(waiting, /client gone/);
  assert.ok(!log.includes('SELECT 2'), 'a dropped statement is never sent');
  finish!();
  await slow;
  assert.equal(slots.running, 0);
  c1.release();
  assert.equal(fake.query, originalQuery);
});

test('Slots.forceAcquire passes the limit; its release never hands a slot over the limit', async () => {
  const s = new Slots(1);
  const a = await s.acquire();
  const forced = s.forceAcquire();
  assert.equal(s.running, 2);
  let got = false;
  const w = s.acquire().then((r) => ((got = true), r));
  a();
  await tick();
  assert.equal(got, false, 'still one running (forced): the waiter waits');
  forced();
  (await w)();
  assert.equal(s.running, 0);
});

test('admittedSource: a light request starts at once; past heavyAfterMs it takes a slot, then waits like any heavy one', async () => {
  const slots = new Slots(1);
  const held = await slots.acquire(); // a heavy statement of another request runs
  let finish: (() => void) | null = null;
  const client = {
    query: (text: string) => (text === 'SLOW' ? new Promise((r) => (finish = () => r({ rows: [] }))) : Promise.resolve({ rows: [] })),
    release: () => {},
  };
  const src = admittedSource({ connect: async () => client as unknown as pg.PoolClient }, slots, () => undefined, () => new Error('gone'), 30);
  const c = await src.connect();
  await c.query('SELECT light'); // not queued behind the held slot
  const slow = c.query('SLOW');
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(slots.running, 2, 'past 30 ms the statement holds a slot too');
  finish!();
  await slow;
  assert.equal(slots.running, 1);
  let ran = false;
  const heavy = c.query('SELECT heavy').then(() => (ran = true));
  await tick();
  assert.equal(ran, false, 'the request is heavy now: it waits for the slot');
  held();
  await heavy;
  assert.equal(slots.running, 0);
});

test('ReadCost: the PostgreSQL time halves every half-life; decayed clients are forgotten', () => {
  let now = 0;
  const cost = new ReadCost(10_000, () => now);
  cost.add('a', 800);
  cost.add('a', 400);
  assert.equal(cost.get('a'), 1200);
  now = 10_000;
  assert.equal(cost.get('a'), 600);
  cost.add('a', 100);
  now = 20_000;
  assert.equal(cost.get('a'), 350);
  assert.equal(cost.get('b'), 0);
  for (let i = 0; i < 1001; i++) cost.add(`c${i}`, 1);
  now = 200_000;
  cost.add('z', 1); // the 1002nd: a sweep of what decayed
  assert.ok(cost.size < 10, `${cost.size} entries kept`);
});

test('Slots: waiters with a lower priority go first, arrival order among equals', async () => {
  const s = new Slots(1);
  const held = await s.acquire();
  const order: string[] = [];
  const w = (name: string, priority: number) => s.acquire(undefined, undefined, priority).then((r) => {
    order.push(name);
    r();
  });
  const all = [w('slow-3rd', 2400), w('slow-2nd', 1200), w('cheap-a', 0), w('cheap-b', 0), w('mid', 30)];
  held();
  await Promise.all(all);
  assert.deepEqual(order, ['cheap-a', 'cheap-b', 'mid', 'slow-2nd', 'slow-3rd']);
});
