// A small HTTP server that serves only exportRoutes (the real Router, HttpServer, auth,
// rate-limit gate and readGuard), built the way internal/app/runtime.ts builds the read
// deps, so the export tests do not depend on exportRoutes being wired into the app yet.
// Plus helpers to write events/profiles straight into the tables of a TestEnv database.
import { randomUUID } from 'node:crypto';
import { Authenticator } from '../../internal/auth/auth';
import { readRoutes } from '../../internal/app/read-routes';
import type { EventRecord } from '../../internal/model/event';
import { exportRoutes, type ExportRouteOptions } from '../../internal/export/routes';
import { Router } from '../../internal/http/router';
import { HttpServer } from '../../internal/http/server';
import { createLogger } from '../../internal/obs/log';
import { createMetrics } from '../../internal/obs/metrics';
import { Gate } from '../../internal/ratelimit/gate';
import type { ReadDeps } from '../../internal/read/guard';
import { connectRedis, redisKeys } from '../../internal/redis/redis';
import { createPool, type Pool } from '../../internal/store/db';
import { PartitionKeeper } from '../../internal/store/partitions';
import { REDIS_URL, type TestEnv } from './harness';
import { mulberry32 } from './random';

export interface ExportServer {
  url: string;
  deps: ReadDeps;
  close(): Promise<void>;
}

export interface ExportServerOptions extends ExportRouteOptions {
  queryTimeoutMs?: number;
  /** Another database than the env's (a private PostgreSQL). */
  databaseUrl?: string;
  /** Connections in the server's pool (default 10). */
  poolMax?: number;
  /** Serve the insights routes too. */
  insights?: boolean;
}

export async function startExportServer(env: TestEnv, options: ExportServerOptions = {}): Promise<ExportServer> {
  const db = createPool(options.databaseUrl ?? env.databaseUrl, options.poolMax ?? 10);
  const redis = await connectRedis(REDIS_URL, { failFast: true });
  const keys = redisKeys(env.namespace);
  const deps: ReadDeps = {
    db, redis, keys,
    auth: new Authenticator(db),
    gate: new Gate(redis, keys),
    log: createLogger('silent'),
    metrics: createMetrics(),
    queryTimeoutMs: options.queryTimeoutMs ?? 5000,
  };
  const router = new Router();
  for (const r of exportRoutes(deps, options)) router.add(r);
  if (options.insights) for (const r of readRoutes(deps)) router.add(r);
  const server = new HttpServer({ router, port: 0, host: '127.0.0.1' });
  const port = await server.listen();
  return {
    url: `http://127.0.0.1:${port}`,
    deps,
    async close() {
      server.close();
      redis.disconnect();
      await db.end();
    },
  };
}

/** One `events` row, every column given (jsonb_populate_recordset does not apply defaults). */
export interface EventRow {
  id: string;
  project_id: string;
  name: string;
  device_id: string;
  profile_id: string;
  session_id: string | null;
  /** ISO 8601, up to microseconds. */
  created_at: string;
  received_at: string;
  properties: Record<string, unknown>;
  groups: string[];
  origin: string;
  path: string;
  title: string;
  referrer: string;
  referrer_name: string;
  referrer_type: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
  utm_term: string;
  utm_content: string;
  country: string;
  region: string;
  city: string;
  latitude: number | null;
  longitude: number | null;
  device: string;
  browser: string;
  browser_version: string;
  os: string;
  os_version: string;
  brand: string;
  model: string;
  is_bot: boolean;
  bot_reason: string | null;
  duration_ms: number | null;
}

export function eventRow(projectId: string, over: Partial<EventRow> & { created_at: string }): EventRow {
  return {
    id: randomUUID(), project_id: projectId, name: 'screen_view', device_id: 'dev', profile_id: 'dev', session_id: null,
    received_at: over.created_at, properties: {}, groups: [], origin: '', path: '', title: '',
    referrer: '', referrer_name: '', referrer_type: '', utm_source: '', utm_medium: '', utm_campaign: '', utm_term: '', utm_content: '',
    country: '', region: '', city: '', latitude: null, longitude: null,
    device: '', browser: '', browser_version: '', os: '', os_version: '', brand: '', model: '',
    is_bot: false, bot_reason: null, duration_ms: null,
    ...over,
  };
}

/** Creates the monthly partitions (plain PostgreSQL) the rows need, with the worker's own code. */
export async function ensurePartitions(db: Pool, instants: Iterable<string | number | Date>): Promise<void> {
  const { rows } = await db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts');
  const keeper = new PartitionKeeper(db, rows[0]?.ts ?? false);
  const months = new Map<string, Date>();
  for (const t of instants) {
    const d = new Date(t);
    months.set(d.toISOString().slice(0, 7), d);
  }
  await keeper.ensureFor([...months.values()].map((createdAt) => ({ createdAt }) as EventRecord));
}

/**
 * Inserts event rows as the worker's commit does: with the (project, UTC hour) of each logged
 * in rollup_invalidations in the same transaction, so reads over the event rollups
 * (sql/009_event_rollups.sql) stay exact.
 */
export async function insertEvents(db: Pool, rows: EventRow[]): Promise<void> {
  await ensurePartitions(db, rows.map((r) => r.created_at));
  for (let i = 0; i < rows.length; i += 2000) {
    const json = JSON.stringify(rows.slice(i, i + 2000));
    await db.query(
      `WITH ins AS (INSERT INTO events SELECT * FROM jsonb_populate_recordset(NULL::events, $1::jsonb) RETURNING project_id, created_at)
       INSERT INTO rollup_invalidations (project_id, bucket)
       SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM ins
       ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq')`,
      [json],
    );
  }
}

export interface ProfileRow {
  project_id: string;
  id: string;
  first_name: string | null;
  last_name: string | null;
  email: string | null;
  properties: Record<string, unknown>;
  groups: string[];
}

export async function insertProfiles(db: Pool, rows: ProfileRow[]): Promise<void> {
  const now = new Date().toISOString();
  const full = rows.map((r) => ({ ...r, created_at: now, updated_at: now }));
  await db.query('INSERT INTO profiles SELECT * FROM jsonb_populate_recordset(NULL::profiles, $1::jsonb)', [JSON.stringify(full)]);
}


/** One `sessions` row, every column given (jsonb_populate_recordset does not apply defaults). */
export interface SessionRow {
  id: string;
  project_id: string;
  device_id: string;
  profile_id: string;
  /** ISO 8601. */
  started_at: string;
  last_event_at: string;
  duration_ms: number;
  ended: boolean;
  entry_origin: string;
  entry_path: string;
  exit_origin: string;
  exit_path: string;
  screen_view_count: number;
  event_count: number;
  is_bounce: boolean;
  is_bot: boolean;
  last_event_id: string | null;
  last_event_is_view: boolean;
  referrer: string;
  referrer_name: string;
  referrer_type: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
  utm_term: string;
  utm_content: string;
  country: string;
  region: string;
  city: string;
  device: string;
  browser: string;
  browser_version: string;
  os: string;
  os_version: string;
  brand: string;
  model: string;
  updated_at: string;
}

/**
 * A sessions row; give the fields the scenario needs. Seeded sessions must agree with their
 * events (session_id, times, entry and exit pages, counts) as the sessionizer would write them.
 */
export function sessionRow(projectId: string, over: Partial<SessionRow> & { started_at: string }): SessionRow {
  return {
    id: randomUUID(), project_id: projectId, device_id: 'dev', profile_id: 'dev',
    last_event_at: over.started_at, duration_ms: 0, ended: false,
    entry_origin: '', entry_path: '', exit_origin: '', exit_path: '', screen_view_count: 0, event_count: 0,
    is_bounce: true, is_bot: false, last_event_id: null, last_event_is_view: false,
    referrer: '', referrer_name: '', referrer_type: '', utm_source: '', utm_medium: '', utm_campaign: '', utm_term: '', utm_content: '',
    country: '', region: '', city: '', device: '', browser: '', browser_version: '', os: '', os_version: '', brand: '', model: '',
    updated_at: over.started_at,
    ...over,
  };
}

export async function insertSessions(db: Pool, rows: SessionRow[]): Promise<void> {
  await db.query('INSERT INTO sessions SELECT * FROM jsonb_populate_recordset(NULL::sessions, $1::jsonb)', [JSON.stringify(rows)]);
}
