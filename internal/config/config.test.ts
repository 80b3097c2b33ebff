import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_SHARDS, defaultReadConcurrency, liveMaxSocketsPerProject, loadConfig } from './config';

test('defaults match semantics.md "Running it"', () => {
  const c = loadConfig({});
  assert.equal(c.PORT, 3000);
  assert.equal(c.DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/tidemark');
  assert.equal(c.NATS_URL, 'nats://127.0.0.1:4222');
  assert.equal(c.REDIS_URL, 'redis://127.0.0.1:6379');
  assert.equal(c.TIDEMARK_NAMESPACE, 'tidemark');
});

test('TIDEMARK_SHARDS: 4 for a new stream when unset (then the stream\'s recorded count wins); set, it is explicit', () => {
  const unset = loadConfig({});
  assert.equal(DEFAULT_SHARDS, 4);
  assert.equal(unset.TIDEMARK_SHARDS, 4);
  assert.equal(unset.shardsExplicit, false);
  const set = loadConfig({ TIDEMARK_SHARDS: '16' });
  assert.equal(set.TIDEMARK_SHARDS, 16);
  assert.equal(set.shardsExplicit, true);
  assert.throws(() => loadConfig({ TIDEMARK_SHARDS: '0' }), /TIDEMARK_SHARDS/);
});

test('WORKER_LINGER_MS: 150 by default, 0 turns it off', () => {
  assert.equal(loadConfig({}).WORKER_LINGER_MS, 150);
  assert.equal(loadConfig({ WORKER_LINGER_MS: '0' }).WORKER_LINGER_MS, 0);
});

test('a namespace that would break subjects is refused with the variable named', () => {
  assert.throws(() => loadConfig({ TIDEMARK_NAMESPACE: 'a.b' }), /TIDEMARK_NAMESPACE/);
  assert.throws(() => loadConfig({ PORT: 'abc' }), /PORT/);
});

test('API_THREADS: 1 by default; more than 1 needs a fixed PORT (the threads share it)', () => {
  assert.equal(loadConfig({}).API_THREADS, 1);
  assert.equal(loadConfig({ API_THREADS: '4', PORT: '8080' }).API_THREADS, 4);
  assert.throws(() => loadConfig({ API_THREADS: '2', PORT: '0' }), /API_THREADS: API_THREADS > 1 needs a fixed PORT/);
  assert.throws(() => loadConfig({ API_THREADS: '0' }), /API_THREADS/);
  assert.throws(() => loadConfig({ API_THREADS: '65' }), /API_THREADS/);
});

test('TIDEMARK_STREAM_REPLICAS: 1 by default, 1 to 5 (the most JetStream holds)', () => {
  assert.equal(loadConfig({}).TIDEMARK_STREAM_REPLICAS, 1);
  assert.equal(loadConfig({ TIDEMARK_STREAM_REPLICAS: '3' }).TIDEMARK_STREAM_REPLICAS, 3);
  for (const bad of ['0', '6', '2.5', 'three']) assert.throws(() => loadConfig({ TIDEMARK_STREAM_REPLICAS: bad }), /TIDEMARK_STREAM_REPLICAS/);
});

test('NATS_URL: one server or several comma-separated; a malformed entry is refused with the variable named', () => {
  const list = 'nats://10.0.0.1:4222,nats://10.0.0.2:4222, nats://10.0.0.3:4222';
  assert.equal(loadConfig({ NATS_URL: list }).NATS_URL, list);
  assert.equal(loadConfig({ NATS_URL: 'nats-0.nats:4222,nats-1.nats:4222' }).NATS_URL, 'nats-0.nats:4222,nats-1.nats:4222');
  for (const bad of ['nats://a:4222,,nats://b:4222', 'http://a:4222', 'ws://a:8080', 'nats://a:4222,', '']) {
    assert.throws(() => loadConfig({ NATS_URL: bad }), /NATS_URL/, bad);
  }
});

test('WORKER_SESSION_CACHE: 50,000 devices per worker process by default (the old 200,000 per shard × 16 shards outgrew the heap)', () => {
  assert.equal(loadConfig({}).WORKER_SESSION_CACHE, 50_000);
  assert.equal(loadConfig({ WORKER_SESSION_CACHE: '1000' }).WORKER_SESSION_CACHE, 1000);
  for (const bad of ['0', '-1', 'lots']) assert.throws(() => loadConfig({ WORKER_SESSION_CACHE: bad }), /WORKER_SESSION_CACHE/);
});

test('WORKER_COMMITS_MAX: 2 by default, at least 1; WORKER_EVENTS_COPY: true unless false or 0', () => {
  assert.equal(loadConfig({}).WORKER_COMMITS_MAX, 2);
  assert.equal(loadConfig({ WORKER_COMMITS_MAX: '16' }).WORKER_COMMITS_MAX, 16);
  assert.throws(() => loadConfig({ WORKER_COMMITS_MAX: '0' }), /WORKER_COMMITS_MAX/);
  assert.equal(loadConfig({}).WORKER_EVENTS_COPY, true);
  assert.equal(loadConfig({ WORKER_EVENTS_COPY: 'false' }).WORKER_EVENTS_COPY, false);
  assert.equal(loadConfig({ WORKER_EVENTS_COPY: '0' }).WORKER_EVENTS_COPY, false);
  assert.throws(() => loadConfig({ WORKER_EVENTS_COPY: 'no' }), /WORKER_EVENTS_COPY/);
});

test('read admission: READ_CONCURRENCY the cores less one (at least 1); per client 2 running, 16 waiting; heavy after 1000 ms', () => {
  assert.equal(defaultReadConcurrency(1), 1);
  assert.equal(defaultReadConcurrency(2), 1);
  assert.equal(defaultReadConcurrency(8), 7);
  const c = loadConfig({});
  assert.equal(c.READ_CONCURRENCY, defaultReadConcurrency());
  assert.equal(c.READ_CONCURRENCY_PER_CLIENT, 2);
  assert.equal(c.READ_QUEUE_PER_CLIENT, 100);
  assert.equal(c.READ_HEAVY_AFTER_MS, 1000);
  assert.equal(loadConfig({ READ_QUEUE_PER_CLIENT: '0', READ_HEAVY_AFTER_MS: '0' }).READ_QUEUE_PER_CLIENT, 0);
  for (const [k, bad] of [['READ_CONCURRENCY', '0'], ['READ_CONCURRENCY_PER_CLIENT', '0'], ['READ_QUEUE_PER_CLIENT', '-1'], ['READ_HEAVY_AFTER_MS', 'x']] as const) {
    assert.throws(() => loadConfig({ [k]: bad }), new RegExp(k));
  }
});

test('live push: 20,000 authenticated sockets, half of them per project unless set (never above the total), 1,000 authenticating', () => {
  const d = loadConfig({});
  assert.deepEqual([d.LIVE_MAX_SOCKETS, liveMaxSocketsPerProject(d), d.LIVE_MAX_AUTHENTICATING], [20_000, 10_000, 1_000]);
  assert.equal(liveMaxSocketsPerProject(loadConfig({ LIVE_MAX_SOCKETS: '200' })), 100);
  assert.equal(liveMaxSocketsPerProject(loadConfig({ LIVE_MAX_SOCKETS: '1' })), 1);
  assert.equal(liveMaxSocketsPerProject(loadConfig({ LIVE_MAX_SOCKETS: '200', LIVE_MAX_SOCKETS_PER_PROJECT: '200' })), 200);
  assert.throws(() => loadConfig({ LIVE_MAX_SOCKETS: '200', LIVE_MAX_SOCKETS_PER_PROJECT: '201' }), /LIVE_MAX_SOCKETS_PER_PROJECT: at most LIVE_MAX_SOCKETS/);
  for (const bad of ['0', '-1', 'x']) assert.throws(() => loadConfig({ LIVE_MAX_SOCKETS_PER_PROJECT: bad }), /LIVE_MAX_SOCKETS_PER_PROJECT/);
  assert.throws(() => loadConfig({ LIVE_MAX_AUTHENTICATING: '0' }), /LIVE_MAX_AUTHENTICATING/);
});
