// Shared by the query benchmarks bench/queries.ts (insights), bench/export-queries.ts and
// bench/product-queries.ts:
// their command line, timed authenticated GETs and the timed loop of a route, percentiles, the machine and PostgreSQL
// description, and the clean-up of a run's NATS stream and Redis keys.
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { exactVisitorsMaxFrom } from '../internal/config/config';

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface QueryBenchArgs {
  dbs: string[];
  n: number;
  minN: number;
  warmup: number;
  budgetMs: number;
  timeoutMs: string;
  noWrite: boolean;
}

/** `--db URL` (repeatable; default bench_1m and bench_10m), `--n`, `--min-n`, `--warmup`, `--budget-s`, `--timeout-ms`, `--no-write`. */
export function queryBenchArgs(defaults: { n: number; warmup: number; budgetS: number }): QueryBenchArgs {
  const { values } = parseArgs({
    options: {
      db: { type: 'string', multiple: true },
      n: { type: 'string', default: String(defaults.n) },
      'min-n': { type: 'string', default: '10' },
      warmup: { type: 'string', default: String(defaults.warmup) },
      'budget-s': { type: 'string', default: String(defaults.budgetS) },
      'timeout-ms': { type: 'string', default: '60000' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  return {
    dbs: values.db?.length ? values.db : ['postgres://postgres@127.0.0.1:5432/bench_1m', 'postgres://postgres@127.0.0.1:5432/bench_10m'],
    n: Number(values.n),
    minN: Number(values['min-n']),
    warmup: Number(values.warmup),
    budgetMs: Number(values['budget-s']) * 1000,
    timeoutMs: values['timeout-ms']!,
    noWrite: values['no-write'] === true,
  };
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export const fmt = (ms: number) => (Number.isNaN(ms) ? 'n/a' : ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`);

export interface Creds {
  clientId: string;
  clientSecret: string;
}

/** A GET with the client's credentials, timed to the last byte of the body (the JSON body when 200). */
export async function request(url: string, c: Creds): Promise<{ ok: boolean; ms: number; body: any }> {
  const t = performance.now();
  const res = await fetch(url, { headers: { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret } });
  const text = await res.text();
  const ms = performance.now() - t;
  return { ok: res.status === 200, ms, body: res.status === 200 ? JSON.parse(text) : text };
}

/**
 * One route's timed loop, shared by the query benchmarks: warm-up requests (`warmup`, those
 * already sent counted in `warmed`, and at least `warmMs` of them), then up to `n` timed
 * requests, fewer (at least `minN`) once `budgetMs` has passed; the warm-up takes at most a
 * quarter of the budget. Requests rotate over the clients `next` hands out.
 */
export async function timeRoute(
  url: string, next: () => Creds,
  o: { n: number; minN: number; budgetMs: number; warmup: number; warmed?: number; warmMs?: number },
): Promise<{ p50: number; p95: number; p99: number; n: number; errors: number }> {
  const w0 = performance.now();
  for (let i = o.warmed ?? 0; (i < o.warmup || performance.now() - w0 < (o.warmMs ?? 0)) && performance.now() - w0 < o.budgetMs / 4; i++) {
    await request(url, next());
  }
  const times: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  while (times.length + errors < o.n && (times.length + errors < o.minN || performance.now() - t0 < o.budgetMs)) {
    const r = await request(url, next());
    if (r.ok) times.push(r.ms);
    else errors++;
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p95: percentile(times, 95), p99: percentile(times, 99), n: times.length, errors };
}

/** Deletes a run's JetStream stream and Redis keys. */
export async function cleanupNamespace(namespace: string): Promise<void> {
  try {
    const nc = await connect({ servers: NATS_URL });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`${namespace}_events`).catch(() => {});
    await nc.close();
  } catch {}
  const redis = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  redis.disconnect();
}

/** The machine, Node, the PostgreSQL version and the settings that matter for these queries. */
export async function machine(url: string): Promise<Record<string, string>> {
  const cpu = readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? os.cpus()[0]?.model ?? '?';
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const version = (await db.query<{ v: string }>('SELECT version() AS v')).rows[0]!.v.split(' on ')[0]!;
  const settings = (await db.query<{ name: string; setting: string; unit: string | null }>(
    `SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'max_parallel_workers_per_gather', 'jit', 'random_page_cost') ORDER BY name`,
  )).rows.map((r) => {
    const kb = r.unit === '8kB' ? Number(r.setting) * 8 : r.unit === 'kB' ? Number(r.setting) : null;
    return `${r.name}=${kb === null ? `${r.setting}${r.unit ?? ''}` : kb >= 1024 ? `${kb / 1024}MB` : `${kb}kB`}`;
  }).join(', ');
  const hll = (await db.query<{ v: string | null }>(`SELECT (SELECT extversion FROM pg_extension WHERE extname = 'hll') AS v`)).rows[0]?.v;
  await db.end();
  let nproc = String(os.cpus().length);
  try {
    nproc = execSync('nproc').toString().trim();
  } catch {}
  return {
    nproc, cpu, node: process.version, postgres: version, settings,
    visitors: hll
      ? `hll ${hll} installed: distinct counts exact up to ${exactVisitorsMaxFrom(process.env).toLocaleString('en')} (TIDEMARK_EXACT_VISITORS_MAX), HyperLogLog sketches above`
      : 'no hll extension: distinct counts always exact',
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
  };
}

/**
 * The live tail the query benches read: the last two hours of `project`'s data (by its
 * sessions' starts or its events' times) logged in rollup_invalidations, as the worker keeps
 * the current and the previous hour ("still changing": read raw, not from the rollups).
 */
export async function logLiveTail(db: Pick<pg.ClientBase, 'query'>, project: string, by: 'sessions' | 'events'): Promise<void> {
  const time = by === 'sessions' ? 'started_at' : 'created_at';
  await db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket)
     SELECT $1, h FROM (SELECT date_trunc('hour', max(${time}), 'UTC') AS m FROM ${by} WHERE project_id = $1) x,
       LATERAL (VALUES (x.m), (x.m - interval '1 hour')) v(h)
     ON CONFLICT DO NOTHING`,
    [project],
  );
}
