// Idempotent retries. With NATS stopped (SIGSTOP) a publish times out and
// the API answers 503, yet NATS stores the message once it runs again: a client that retries
// as told must not count the event twice. Each request carries an idempotency key (the
// `Idempotency-Key` header, or the `__idempotencyKey` property for SDKs that cannot set a
// header per event); after NATS resumes every request is retried with the same key until it
// gets a 202, and every key is then stored exactly once.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { post, sleep, spawnApp, startApp, TestEnv, waitFor, type Credentials } from './support/harness';
import { PrivateEnv, PrivateNats, stopAllPrivate, stopChild, spawnAppRetry } from './support/private-services';

const UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36';

/** Rows of `events` per idempotency key (the test puts the key in the property `k` as well). */
async function storedPerKey(env: TestEnv, name: string): Promise<Map<string, number>> {
  const r = await env.db.query<{ k: string; n: string }>(
    `SELECT properties->>'k' AS k, count(*) AS n FROM events WHERE name = $1 GROUP BY 1`, [name],
  );
  return new Map(r.rows.map((x) => [x.k, Number(x.n)]));
}

/** One sent time per key: a retry repeats the request as it was. */
const sentTimes = new Map<string, string>();

function body(name: string, key: string, i: number, viaProperty: boolean, withTimestamp: boolean) {
  const properties: Record<string, unknown> = { k: key, __path: `https://shop.example/p/${i}` };
  if (viaProperty) properties.__idempotencyKey = key;
  // Half the requests carry their own time (an SDK's queue does), half take the receipt time,
  // which differs between the first attempt and the retry.
  if (withTimestamp) {
    if (!sentTimes.has(key)) sentTimes.set(key, new Date(Date.now() - 60_000).toISOString());
    properties.__timestamp = sentTimes.get(key);
  }
  return { type: 'track', payload: { name, properties } };
}

describe_in_process();

function describe_in_process(): void {
  let env: TestEnv;
  let app: Awaited<ReturnType<typeof startApp>>;
  let writer: Credentials;
  before(async () => {
    env = await new TestEnv('idem').setup();
    const projectId = await env.project();
    writer = await env.client(projectId, 'write', 0);
    app = await startApp(env);
  });
  after(async () => {
    await app?.drain();
    await env?.teardown();
  });

  test('the same request sent twice with the same key is stored once; without a key, twice', async () => {
    // One key per pair: a key names one event (a second event under the same key is dropped).
    const key = `k-${randomBytes(4).toString('hex')}`;
    const propKey = `p-${randomBytes(4).toString('hex')}`;
    const send = (b: unknown, headers: Record<string, string> = {}) => post(`${app.url}/track`, b, writer, { userAgent: UA, ip: '81.2.69.160', headers });
    for (let n = 0; n < 2; n++) {
      assert.equal((await send(body('dup_keyed', key, 1, false, false), { 'Idempotency-Key': key })).status, 202);
      assert.equal((await send(body('dup_prop', propKey, 1, true, true))).status, 202);
      assert.equal((await send(body('dup_none', key, 1, false, true))).status, 202);
    }
    await waitFor(async () => ((await storedPerKey(env, 'dup_none')).get(key) ?? 0) >= 2, { what: 'the unkeyed pair to be stored' });
    await sleep(1000);
    assert.deepEqual([...(await storedPerKey(env, 'dup_keyed'))], [[key, 1]]);
    assert.deepEqual([...(await storedPerKey(env, 'dup_prop'))], [[propKey, 1]]);
    assert.deepEqual([...(await storedPerKey(env, 'dup_none'))], [[key, 2]], 'without a key a repeat is a new event');
    // The property is consumed, never stored as a custom property.
    const props = await env.db.query(`SELECT properties FROM events WHERE name = 'dup_prop'`);
    assert.equal(props.rows[0].properties.__idempotencyKey, undefined);
  });

  test('a bad key is a 400 naming it', async () => {
    const r = await post(`${app.url}/track`, body('bad_key', 'x', 1, false, false), writer, { headers: { 'Idempotency-Key': 'x'.repeat(300) } });
    assert.equal(r.status, 400);
    assert.match(r.body.message, /idempotency key/);
    assert.deepEqual(r.body.details.issues[0].path, ['headers', 'Idempotency-Key']);
  });
}

test('NATS stopped (SIGSTOP) for 7 s: 503s for events NATS stores later; retried with their keys, each is stored exactly once', { timeout: 180_000 }, async (t) => {
  const nats = await PrivateNats.start();
  const env = new PrivateEnv('idemnats', { natsUrl: nats.url });
  const children: Awaited<ReturnType<typeof spawnApp>>[] = [];
  try {
    await env.setup();
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const appEnv = { INGEST_PUBLISH_TIMEOUT_MS: '2000' };
    const [api, worker] = await Promise.all([spawnAppRetry(env, 'api', appEnv), spawnAppRetry(env, 'worker', appEnv)]);
    children.push(api, worker);
    const send = (i: number, key: string, name = 'retried') =>
      post(`${api.url}/track`, body(name, key, i, i % 2 === 1, i % 4 < 2), writer, {
        userAgent: UA, ip: `81.2.69.${10 + (i % 5)}`, headers: i % 2 === 0 ? { 'Idempotency-Key': key } : {},
      }).catch(() => ({ status: 0, body: null, headers: new Headers() }));
    const keys = Array.from({ length: 20 }, (_, i) => `order-${i}-${randomBytes(3).toString('hex')}`);
    // Warm: the client is verified and cached, NATS connections are up.
    assert.equal((await send(99, `warm-${randomBytes(3).toString('hex')}`, 'warm')).status, 202);

    nats.child!.kill('SIGSTOP');
    const stoppedAt = Date.now();
    let first: number[];
    try {
      first = (await Promise.all(keys.map((k, i) => send(i, k)))).map((r) => r.status);
      await sleep(Math.max(0, 7000 - (Date.now() - stoppedAt)));
    } finally {
      nats.child!.kill('SIGCONT');
    }
    t.diagnostic(`first attempts while NATS was stopped: ${JSON.stringify(first)}`);
    assert.ok(first.every((s) => s === 503), `every first attempt is a 503 (never a 2xx for an unknown outcome): ${first}`);

    // Retry as told: with backoff, the same request and key, until 202.
    const retries: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      for (let attempt = 0, delay = 200; ; attempt++, delay *= 2) {
        const r = await send(i, keys[i]!);
        retries.push(r.status);
        if (r.status === 202) break;
        assert.ok(attempt < 8, `key ${i} never accepted: ${r.status}`);
        await sleep(delay);
      }
    }
    t.diagnostic(`retry answers: ${JSON.stringify(retries)}`);

    // Every key once; nothing more arrives later.
    let last = new Map<string, number>();
    await waitFor(async () => (last = await storedPerKey(env, 'retried')).size === keys.length, { timeoutMs: 60_000, what: 'every key stored' }).catch((err) => {
      throw new Error(`${(err as Error).message}: stored ${JSON.stringify([...last])}`);
    });
    await sleep(3000);
    const stored = await storedPerKey(env, 'retried');
    const twice = keys.filter((k) => (stored.get(k) ?? 0) !== 1);
    assert.deepEqual(twice.map((k) => [k, stored.get(k)]), [], 'every key stored exactly once');
    // And counted once: the sessions' counters agree with the events (warm-up included).
    const c = await env.db.query(`SELECT (SELECT coalesce(sum(event_count), 0)::int FROM sessions) AS counted,
      (SELECT count(*)::int FROM events WHERE name NOT IN ('session_start', 'session_end')) AS events`);
    assert.equal(c.rows[0].counted, keys.length + 1, `sessions count ${c.rows[0].counted} events for ${keys.length + 1} sent`);
    assert.equal(c.rows[0].events, keys.length + 1);
  } finally {
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGTERM', 10_000)));
    await env.teardown().catch(() => {});
    await stopAllPrivate();
  }
});
