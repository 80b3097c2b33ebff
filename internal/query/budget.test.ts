// RequestBudget and readError without a server: a fake pool records what the budget does
// with the connections it lends (the real cancellation is in test/faults-reads.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type pg from 'pg';
import { BadRequestError, ServiceUnavailableError } from '../http/errors';
import { budgetOf, RequestBudget } from './budget';
import { withTimeout } from './db';
import { ClientGoneError, DatabaseUnavailableError, isDatabaseUnavailable, PoolExhaustedError, QueryTimeoutError, readError } from './errors';

class FakeClient {
  released: (Error | boolean | undefined)[] = [];
  queries: string[] = [];
  release = (err?: Error | boolean) => void this.released.push(err);
  async query(text: string): Promise<{ rows: unknown[] }> {
    this.queries.push(text);
    return { rows: [] };
  }
}

/** A pool that lends `free` clients at once and makes later callers wait until `give()`. */
class FakePool {
  lent: FakeClient[] = [];
  private waiting: ((c: FakeClient) => void)[] = [];
  constructor(private free: number) {}
  connect(): Promise<pg.PoolClient> {
    const c = new FakeClient();
    this.lent.push(c);
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(c as unknown as pg.PoolClient);
    }
    return new Promise((resolve) => this.waiting.push(() => resolve(c as unknown as pg.PoolClient)));
  }
  give(): void {
    this.waiting.shift()?.(undefined as never);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('RequestBudget', () => {
  it('derives the statement timeout from what is left of the budget', async () => {
    const pool = new FakePool(2);
    const budget = new RequestBudget(1000);
    const source = budget.source(pool);
    assert.equal(budgetOf(source), budget);
    await sleep(300);
    await withTimeout(source, 5000, async () => undefined);
    const set = pool.lent[0]!.queries.find((q) => q.includes('statement_timeout'));
    assert.ok(set, 'the statement timeout is set');
    budget.close();
  });

  it('a connection lent when the budget ends is discarded on release, others go back to the pool', async () => {
    const pool = new FakePool(2);
    const budget = new RequestBudget(50);
    const source = budget.source(pool);
    const early = await source.connect();
    early.release();
    const held = await source.connect();
    await sleep(80);
    assert.equal(budget.ended, 'deadline');
    await assert.rejects(held.query('SELECT 1'), (err: unknown) => err instanceof QueryTimeoutError, 'no statement after the end');
    held.release();
    assert.deepEqual(pool.lent[0]!.released, [undefined], 'released before the end: back to the pool');
    assert.deepEqual(pool.lent[1]!.released, [true], 'lent at the end: destroyed');
    await assert.rejects(source.connect(), (err: unknown) => err instanceof QueryTimeoutError && err.budget && /50 ms/.test(err.message));
  });

  it('waiting for a connection past the budget: PoolExhaustedError with Retry-After; the late connection goes back', async () => {
    const pool = new FakePool(0);
    const budget = new RequestBudget(50);
    await assert.rejects(budget.source(pool).connect(), (err: unknown) => err instanceof PoolExhaustedError && err.headers['Retry-After'] === '2');
    pool.give();
    await sleep(10);
    assert.deepEqual(pool.lent[0]!.released, [undefined]);
  });

  it('the client going away ends the budget at once', async () => {
    const pool = new FakePool(1);
    const controller = new AbortController();
    const budget = new RequestBudget(60_000, controller.signal);
    const c = await budget.source(pool).connect();
    controller.abort();
    assert.equal(budget.ended, 'client_gone');
    c.release();
    assert.deepEqual(pool.lent[0]!.released, [true]);
    await assert.rejects(budget.source(pool).connect(), ClientGoneError);
  });

  it('after close() (a streamed body) connections are ordinary ones', async () => {
    const pool = new FakePool(1);
    const budget = new RequestBudget(10);
    budget.close();
    await sleep(30);
    assert.equal(budget.ended, null);
    const c = await budget.source(pool).connect();
    c.release();
    assert.deepEqual(pool.lent[0]!.released, [undefined]);
  });
});

describe('readError', () => {
  it('maps an unreachable or exhausted database to 503 with Retry-After', () => {
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('sorry, too many clients already'), { code: '53300' }),
      Object.assign(new Error('connection failure'), { code: '08006' }),
    ]) {
      assert.ok(isDatabaseUnavailable(err), err.message);
      const mapped = readError(err);
      assert.ok(mapped instanceof DatabaseUnavailableError, err.message);
      assert.equal(mapped.status, 503);
      assert.equal(mapped.headers['Retry-After'], '2');
    }
  });

  it('maps a value PostgreSQL refuses to 400, leaves bugs alone, adds Retry-After to other 503s', () => {
    assert.ok(readError(Object.assign(new Error('invalid input syntax'), { code: '22P02' })) instanceof BadRequestError);
    const bug = new TypeError('x is undefined');
    assert.equal(readError(bug), bug);
    assert.ok(!isDatabaseUnavailable(Object.assign(new Error('syntax error'), { code: '42601' })));
    const other = readError(new ServiceUnavailableError('client store unavailable')) as ServiceUnavailableError;
    assert.equal(other.headers['Retry-After'], '2');
    const timeout = readError(new QueryTimeoutError(5000, true)) as QueryTimeoutError;
    assert.equal(timeout.headers['Retry-After'], undefined, 'a spent budget is no reason to retry the same query');
  });
});
