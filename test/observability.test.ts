// Observability: /metrics scraped before, during and after an ingest shows the service's
// series (internal/obs/metrics.ts: requests, consumer lag, pools, Redis, shards) present and
// moving; readiness flips during a drain; logs are JSON lines with request ids and no secrets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { TestEnv, startApp, spawnApp, post, waitFor, sleep, track, type Credentials } from './support/harness';

// ---------------------------------------------------------------------------------------
// A small parser of the Prometheus text exposition format (0.0.4): HELP/TYPE comments,
// samples `name{label="value",...} value [timestamp]`, label values with \\ \" \n escapes.

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Scrape {
  types: Map<string, string>;
  samples: Sample[];
}

function parsePrometheus(text: string): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const m = /^#\s+TYPE\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s+(counter|gauge|histogram|summary|untyped)\s*$/.exec(line);
      if (m) types.set(m[1]!, m[2]!);
      continue;
    }
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
    if (!name) throw new Error(`line ${n + 1}: no metric name: ${line}`);
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ') i++;
        if (line[i] === '}') {
          i++;
          break;
        }
        const key = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i))?.[0];
        if (!key) throw new Error(`line ${n + 1}: bad label name at ${i}: ${line}`);
        i += key.length;
        if (line[i] !== '=' || line[i + 1] !== '"') throw new Error(`line ${n + 1}: expected =" after ${key}: ${line}`);
        i += 2;
        let value = '';
        for (;;) {
          const c = line[i++];
          if (c === undefined) throw new Error(`line ${n + 1}: unterminated label value: ${line}`);
          if (c === '"') break;
          if (c === '\\') {
            const e = line[i++];
            value += e === 'n' ? '\n' : e === '\\' ? '\\' : e === '"' ? '"' : `\\${e}`;
          } else value += c;
        }
        labels[key] = value;
        if (line[i] === ',') i++;
        else if (line[i] !== '}') throw new Error(`line ${n + 1}: expected , or } at ${i}: ${line}`);
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    if (rest.length < 1 || rest.length > 2 || !rest[0]) throw new Error(`line ${n + 1}: expected value [timestamp]: ${line}`);
    // Special values are case-insensitive, as Prometheus (Go's ParseFloat) reads them:
    // prom-client writes NaN as "Nan".
    const raw = rest[0].toLowerCase();
    const value = raw === '+inf' || raw === 'inf' ? Infinity : raw === '-inf' ? -Infinity : raw === 'nan' ? NaN : Number(raw);
    if (Number.isNaN(value) && raw !== 'nan') throw new Error(`line ${n + 1}: bad value ${rest[0]}`);
    samples.push({ name, labels, value });
  }
  return { types, samples };
}

const matches = (s: Sample, labels: Record<string, string>) => Object.entries(labels).every(([k, v]) => s.labels[k] === v);

/** Samples of one series name whose labels include `labels`. */
function series(s: Scrape, name: string, labels: Record<string, string> = {}): Sample[] {
  return s.samples.filter((x) => x.name === name && matches(x, labels));
}

/** Sum over the matching samples (0 when there are none). */
function total(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  return series(s, name, labels).reduce((a, x) => a + x.value, 0);
}

async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  return parsePrometheus(await res.text());
}

/** A histogram has its TYPE line, +Inf bucket equal to _count, and a _sum. */
function assertHistogram(s: Scrape, name: string, labels: Record<string, string> = {}): void {
  assert.equal(s.types.get(name), 'histogram', `${name} is a histogram`);
  const count = total(s, `${name}_count`, labels);
  assert.equal(total(s, `${name}_bucket`, { ...labels, le: '+Inf' }), count, `${name}: +Inf bucket = count`);
  assert.ok(series(s, `${name}_sum`, labels).length > 0, `${name}_sum present`);
}

test('the Prometheus parser reads labels with escapes, special values and timestamps', () => {
  const s = parsePrometheus(
    [
      '# HELP x_total a "help" line',
      '# TYPE x_total counter',
      'x_total{a="1",b="q\\"uote\\\\back\\nline"} 3',
      'x_total 4 1700000000000',
      '# TYPE h histogram',
      'h_bucket{le="+Inf"} 2',
      'h_sum NaN',
      'p_mean Nan',
      'g{le="0.5",} -Inf',
    ].join('\n'),
  );
  assert.equal(s.types.get('x_total'), 'counter');
  assert.deepEqual(series(s, 'x_total', { a: '1' })[0]!.labels, { a: '1', b: 'q"uote\\back\nline' });
  assert.equal(total(s, 'x_total'), 7);
  assert.equal(total(s, 'h_bucket', { le: '+Inf' }), 2);
  assert.ok(Number.isNaN(series(s, 'h_sum')[0]!.value));
  assert.ok(Number.isNaN(series(s, 'p_mean')[0]!.value));
  assert.throws(() => parsePrometheus('x 1x'));
  assert.equal(series(s, 'g')[0]!.value, -Infinity);
  assert.throws(() => parsePrometheus('x{a="1} 2'));
});

const UA = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15';

/** Runs `fn` over 0..n-1 with at most `width` in flight. */
async function pool<T>(n: number, width: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

test('/metrics: every documented series is present and moves during an ingest', { timeout: 180_000 }, async () => {
  const SHARDS = 4;
  const N = 300;
  const env = await new TestEnv('obs').setup();
  const app = await startApp(env, { api: true, worker: true }, { TIDEMARK_SHARDS: String(SHARDS) });
  let lock: PoolClient | null = null;
  try {
    const projectId = await env.project({ name: 'Obs', timezone: 'UTC' });
    const writer = await env.client(projectId, 'write');
    const limited = await env.client(projectId, 'write', 1); // 1 request per second
    await waitFor(async () => total(await scrape(app.url), 'tidemark_worker_shards_owned') === SHARDS, { what: 'the worker to own every shard' });

    const before = await scrape(app.url);
    assert.equal(before.types.get('tidemark_http_requests_total'), 'counter');
    assert.equal(before.types.get('tidemark_jetstream_consumer_lag'), 'gauge');
    for (let shard = 0; shard < SHARDS; shard++) {
      assert.equal(series(before, 'tidemark_jetstream_consumer_lag', { shard: String(shard) }).length, 1, `lag of shard ${shard} present`);
    }
    assert.equal(total(before, 'tidemark_redis_up'), 1);
    assert.ok(total(before, 'tidemark_pg_pool_clients', { state: 'total' }) >= 1);

    // Hold the worker's commit: events can be accepted (ingest never touches PostgreSQL)
    // but not written, so the consumer lag has to grow, and a pool client sits busy.
    const holder = await env.db.connect();
    lock = holder;
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE events IN EXCLUSIVE MODE');

    const statuses = await pool(N, 20, async (i) => {
      const r = await post(`${app.url}/track`, track('screen_view', { __path: `https://obs.example/p/${i % 7}`, i }), writer, {
        userAgent: UA, ip: `81.2.${i % 50}.${10 + (i % 3)}`,
      });
      return r.status;
    });
    assert.deepEqual([...new Set(statuses)], [202], 'every ingest request is accepted');
    // A client limited to 1 request/s sends 10 at once: at most 2 pass (a window may turn over).
    const limitedStatuses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(`${app.url}/track`, track('click', { i }), limited, { userAgent: UA, ip: '81.3.0.1' }).then((r) => r.status)),
    );
    const rejected = limitedStatuses.filter((s) => s === 429).length;
    assert.ok(rejected >= 8, `429s: ${limitedStatuses.join(',')}`);
    const acceptedLimited = limitedStatuses.filter((s) => s === 202).length;

    // Drops: the API refuses every event the enricher would drop (reserved or empty names,
    // bad timestamps, missing identity are 400s), so no drop is reachable through HTTP.
    // A queued message that predates a rule or comes from a replay is the path the worker's
    // check exists for: publish such ops straight to a shard's subject.
    const bad = (over: Record<string, unknown>) => ({
      kind: 'track', id: randomUUID(), projectId, deviceId: 'd'.repeat(32), receivedAt: new Date().toISOString(), name: 'replayed',
      profileId: 'p1', createdAt: new Date().toISOString(), properties: {}, groups: [], url: null, title: null, referrer: null,
      ip: null, userAgent: null, ...over,
    });
    await app.bus.publishJson(app.bus.subjectFor(projectId, 0), {
      v: 1, ops: [bad({ name: 'session_start' }), bad({ createdAt: 'not a time' }), bad({ profileId: '' })],
    }, randomUUID());

    // During: lag above zero (commits are blocked), a pool client busy.
    const during = (await waitFor(async () => {
      const s = await scrape(app.url);
      return total(s, 'tidemark_jetstream_consumer_lag') > 0 ? s : null;
    }, { what: 'consumer lag above 0 while commits are blocked' }))!;
    const pgTotal = total(during, 'tidemark_pg_pool_clients', { state: 'total' });
    const pgIdle = total(during, 'tidemark_pg_pool_clients', { state: 'idle' });
    assert.ok(pgTotal - pgIdle >= 1, `a pool client is checked out while the commit waits (total ${pgTotal}, idle ${pgIdle})`);
    assert.ok(series(during, 'tidemark_pg_pool_clients', { state: 'waiting' }).length === 1);

    // Per route: /track counted by status, its latency histogram moved by the same amount.
    const req202 = (s: Scrape) => total(s, 'tidemark_http_requests_total', { route: '/track', method: 'POST', status: '202' });
    assert.equal(req202(during) - req202(before), N + acceptedLimited);
    assert.equal(total(during, 'tidemark_http_requests_total', { route: '/track', status: '429' }) - total(before, 'tidemark_http_requests_total', { route: '/track', status: '429' }), rejected);
    const trackCount = (s: Scrape) => total(s, 'tidemark_http_request_duration_seconds_count', { route: '/track', method: 'POST' });
    assert.equal(trackCount(during) - trackCount(before), N + 10);
    assert.ok(total(during, 'tidemark_http_request_duration_seconds_sum', { route: '/track' }) > total(before, 'tidemark_http_request_duration_seconds_sum', { route: '/track' }));
    assertHistogram(during, 'tidemark_http_request_duration_seconds', { route: '/track', method: 'POST' });
    // /metrics itself is a route too.
    assert.ok(total(during, 'tidemark_http_requests_total', { route: '/metrics', status: '200' }) >= 1);

    // JetStream publish latency: one observation per micro-batch, covering every op.
    const published = (s: Scrape) => total(s, 'tidemark_jetstream_publish_duration_seconds_count', { outcome: 'ok' });
    assert.ok(published(during) - published(before) >= 1);
    assert.ok(published(during) - published(before) <= N + acceptedLimited);
    assertHistogram(during, 'tidemark_jetstream_publish_duration_seconds', { outcome: 'ok' });
    assert.equal(total(during, 'tidemark_jetstream_publish_batch_ops_sum') - total(before, 'tidemark_jetstream_publish_batch_ops_sum'), N + acceptedLimited);

    // Rate-limit rejections.
    assert.equal(total(during, 'tidemark_rate_limit_rejections_total', { scope: 'ingest' }) - total(before, 'tidemark_rate_limit_rejections_total', { scope: 'ingest' }), rejected);

    // Release the commit; everything is written, the lag returns to 0 on every shard.
    await holder.query('COMMIT');
    holder.release();
    lock = null;
    const events = N + acceptedLimited;
    await waitFor(async () => Number((await env.db.query("SELECT count(*) FROM events WHERE name <> 'session_start'")).rows[0].count) === events, {
      timeoutMs: 60_000, what: `${events} events written`,
    });
    const after = (await waitFor(async () => {
      const s = await scrape(app.url);
      return total(s, 'tidemark_jetstream_consumer_lag') === 0 && total(s, 'tidemark_enrich_drops_total') >= 3 ? s : null;
    }, { timeoutMs: 30_000, what: 'lag back to 0 and the drops counted' }))!;
    for (let shard = 0; shard < SHARDS; shard++) {
      assert.equal(total(after, 'tidemark_jetstream_consumer_lag', { shard: String(shard) }), 0);
    }

    // Worker batches: sizes and commit latency moved; every op of the ingest went through a batch.
    const batches = (s: Scrape) => total(s, 'tidemark_worker_batch_ops_count');
    assert.ok(batches(after) - batches(before) >= 1);
    assert.ok(total(after, 'tidemark_worker_batch_ops_sum') - total(before, 'tidemark_worker_batch_ops_sum') >= events + 3);
    assertHistogram(after, 'tidemark_worker_batch_ops');
    const commits = (s: Scrape) => total(s, 'tidemark_worker_commit_duration_seconds_count');
    assert.ok(commits(after) - commits(before) >= 1);
    // The first commit waited for the lock: its latency is in the histogram's upper buckets.
    assert.ok(total(after, 'tidemark_worker_commit_duration_seconds_sum') - total(before, 'tidemark_worker_commit_duration_seconds_sum') > 0.05);
    assertHistogram(after, 'tidemark_worker_commit_duration_seconds');
    assert.equal(total(after, 'tidemark_worker_events_total') - total(before, 'tidemark_worker_events_total') >= events, true);

    // Drops, by reason.
    for (const reason of ['invalid_name', 'invalid_timestamp', 'missing_identity']) {
      assert.equal(total(after, 'tidemark_enrich_drops_total', { reason }) - total(before, 'tidemark_enrich_drops_total', { reason }), 1, `drops{reason="${reason}"}`);
    }

    // Pool and Redis state.
    assert.equal(total(after, 'tidemark_redis_up'), 1);
    assert.ok(total(after, 'tidemark_pg_pool_clients', { state: 'total' }) >= 1);
    assert.equal(total(after, 'tidemark_pg_pool_clients', { state: 'waiting' }), 0);
  } finally {
    if (lock) {
      await lock.query('ROLLBACK').catch(() => {});
      lock.release();
    }
    await app.drain();
    await env.teardown();
  }
});

// ---------------------------------------------------------------------------------------
// Child-process tests: the real entry point (cmd/all), signals, stdout.

/**
 * A POST /track whose body arrives in two parts: the server counts it in flight from its
 * headers on, so the drain has to wait for it.
 */
function slowTrack(port: number, creds: Credentials, body: string): { sendRest: () => void; response: Promise<{ status: number; raw: string }>; opened: Promise<void> } {
  const socket = net.connect(port, '127.0.0.1');
  const half = Math.floor(body.length / 2);
  let raw = '';
  const opened = new Promise<void>((resolve, reject) => {
    socket.once('connect', () => {
      socket.write(
        [
          'POST /track HTTP/1.1', `Host: 127.0.0.1:${port}`, 'Content-Type: application/json',
          `service-client-id: ${creds.clientId}`, `service-client-secret: ${creds.clientSecret}`,
          `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', '', '',
        ].join('\r\n') + body.slice(0, half),
      );
      resolve();
    });
    socket.once('error', reject);
  });
  const response = new Promise<{ status: number; raw: string }>((resolve, reject) => {
    socket.on('data', (d) => (raw += d));
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0), raw }));
  });
  return { sendRest: () => socket.write(body.slice(half)), response, opened };
}

test('readiness flips to 503 during a SIGTERM drain; in-flight requests finish; the process exits 0', { timeout: 120_000 }, async () => {
  const env = await new TestEnv('obsdrain').setup();
  const app = await spawnApp(env, 'all');
  try {
    const projectId = await env.project({ name: 'Drain' });
    const writer = await env.client(projectId, 'write');
    await waitFor(async () => (await fetch(`${app.url}/readyz`)).status === 200, { what: '/readyz 200' });
    const ready = (await (await fetch(`${app.url}/readyz`)).json()) as { status: string };
    assert.equal(ready.status, 'ready');

    // A steady stream of requests, before and through the drain.
    const stream: { at: number; status: number | string }[] = [];
    let streaming = true;
    const streamer = (async () => {
      for (let i = 0; streaming && i < 2000; i++) {
        const at = Date.now();
        try {
          const r = await post(`${app.url}/track`, track('tick', { i }), writer);
          stream.push({ at, status: r.status });
        } catch (err) {
          stream.push({ at, status: String((err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message) });
        }
        await sleep(25);
      }
    })();
    await waitFor(() => stream.filter((s) => s.status === 202).length >= 5, { what: 'the stream to be accepted' });

    const slow = slowTrack(app.port, writer, JSON.stringify(track('slow_upload', { pad: 'x'.repeat(2000) })));
    await slow.opened;
    await sleep(300); // the server has its headers: it is in flight

    const signalledAt = Date.now();
    app.child.kill('SIGTERM');
    const exited = new Promise<number | null>((r) => app.child.once('exit', (code) => r(code)));

    // Readiness: 503 while the in-flight upload holds the drain open.
    const notReady = await waitFor(async () => {
      const r = await fetch(`${app.url}/readyz`);
      return r.status === 503 ? r : null;
    }, { timeoutMs: 10_000, intervalMs: 50, what: '/readyz 503 during the drain' });
    assert.equal(notReady!.headers.get('retry-after'), '1');
    await waitFor(() => stream.some((s) => s.at > signalledAt && s.status === 503), { timeoutMs: 10_000, what: 'new ingest refused with 503 during the drain' });
    assert.equal(app.child.exitCode, null, 'still running while a request is in flight');

    // The in-flight request finishes normally, then the process drains and exits 0.
    slow.sendRest();
    const done = await slow.response;
    assert.equal(done.status, 202, done.raw);
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30_000).unref())]);
    streaming = false;
    await streamer;
    assert.equal(code, 0, app.logs());

    // Before the signal only 202s; after it only 503s, then refused (or closed) connections.
    for (const s of stream) {
      if (s.at < signalledAt - 100) assert.equal(s.status, 202, JSON.stringify(s));
      else if (s.at > signalledAt + 100) assert.ok(s.status === 503 || typeof s.status === 'string', JSON.stringify(s));
    }
    const gone = await fetch(`${app.url}/healthz`).then((r) => r.status, (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message);
    assert.equal(gone, 'ECONNREFUSED', 'the port is closed after the exit');
    const logs = app.logs();
    assert.ok(logs.includes('"msg":"draining"') && logs.includes('"msg":"drained"'), logs);
  } finally {
    if (app.child.exitCode === null) app.child.kill('SIGKILL');
    await env.teardown();
  }
});

test('logs are JSON lines; at LOG_LEVEL=debug each request is logged with its request id; secrets never', { timeout: 120_000 }, async () => {
  const env = await new TestEnv('obslog').setup();
  const app = await spawnApp(env, 'all', { LOG_LEVEL: 'debug' });
  try {
    const projectId = await env.project({ name: 'Logs' });
    const writer = await env.client(projectId, 'write');
    const requestId = `obs-${randomUUID()}`;
    const ok = await post(`${app.url}/track`, track('screen_view', { __path: 'https://logs.example/' }), writer, { headers: { 'x-request-id': requestId } });
    assert.equal(ok.status, 202);
    assert.equal(ok.headers.get('x-request-id'), requestId);
    // A request with a wrong secret (401) and one without an id of its own (a generated one).
    const wrong = await post(`${app.url}/track`, track('x'), { clientId: writer.clientId, clientSecret: 'sec_wrong_but_secret_looking_value' });
    assert.equal(wrong.status, 401);
    const generated = wrong.headers.get('x-request-id');
    assert.ok(generated && generated.length >= 4 && generated !== requestId, `a generated request id: ${generated}`);
    const lines = await waitFor(() => {
      const ls = app.logs().split('\n').filter((l) => l.trim());
      return ls.some((l) => l.includes(requestId)) && ls.some((l) => l.includes(generated!)) ? ls : null;
    }, { what: 'request log lines' });

    const records = lines!.map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON log line: ${l}`);
      }
    });
    for (const r of records) {
      assert.equal(typeof r.level, 'number');
      assert.equal(typeof r.time, 'string');
      assert.equal(r.service, 'tidemark');
    }
    const mine = records.find((r) => r.requestId === requestId);
    assert.ok(mine, 'the request is logged with its request id');
    assert.equal(mine.msg, 'request');
    assert.equal(mine.route, '/track');
    assert.equal(mine.status, 202);
    assert.equal(typeof mine.ms, 'number');
    assert.equal(records.find((r) => r.requestId === generated)?.status, 401);

    const text = app.logs();
    assert.ok(!text.includes(writer.clientSecret), 'the client secret is never logged');
    assert.ok(!text.includes('sec_wrong_but_secret_looking_value'), 'a wrong secret is never logged');
  } finally {
    app.child.kill('SIGTERM');
    await new Promise((r) => (app.child.exitCode !== null ? r(null) : app.child.once('exit', r)));
    await env.teardown();
  }
});
