import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from './config';

test('defaults match semantics.md "Running it"', () => {
  const c = loadConfig({});
  assert.equal(c.PORT, 3000);
  assert.equal(c.DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/tidemark');
  assert.equal(c.NATS_URL, 'nats://127.0.0.1:4222');
  assert.equal(c.REDIS_URL, 'redis://127.0.0.1:6379');
  assert.equal(c.TIDEMARK_NAMESPACE, 'tidemark');
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
