// SQL of the periodic jobs: session-end lookups and retention.
import { transaction, type Pool } from './db';
import { PARTITION_LOCK_TIMEOUT_MS } from './partitions';
import { rollupKinds } from './rollups';
import { VISITOR_LOCK } from './visitor-days';

/** Deletes raw events and sessions older than `days` (0 keeps everything). */
export async function applyRetention(db: Pool, days: number): Promise<{ events: number; sessions: number }> {
  if (days <= 0) return { events: 0, sessions: 0 };
  const cutoff = new Date(Date.now() - days * 86_400_000).toISOString();
  const ts = (await db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]?.ts;
  // Idempotency keys live as long as the events they deduplicate.
  await db.query('DELETE FROM op_keys WHERE applied_at < $1', [cutoff]);
  const kinds = await rollupKinds(db);
  // The hour holding the cutoff loses part of its sessions: read raw until the next refresh.
  await db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket) SELECT id, date_trunc('hour', $1::timestamptz, 'UTC') FROM projects
     ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq')`,
    [cutoff],
  );
  // Service-kept rollup tables lose the hours before the cutoff on both engines.
  for (const rel of kinds.keptTables) {
    await db.query(`DELETE FROM "${rel.replace(/"/g, '""')}" WHERE bucket < date_trunc('hour', $1::timestamptz, 'UTC')`, [cutoff]);
  }
  if (ts) {
    await db.query(`SELECT drop_chunks('events', older_than => $1::timestamptz)`, [cutoff]);
    await transaction(db, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [VISITOR_LOCK]);
      // one row per chunk dropped
      const dropped = await c.query(`SELECT drop_chunks('sessions', older_than => $1::timestamptz)`, [cutoff]);
      if (dropped.rowCount) await forgetVisitorDays(c);
    });
    // Rollups of the dropped window are recomputed (to nothing) so they stop counting it.
    for (const rel of kinds.caggs) {
      await db.query('CALL refresh_continuous_aggregate($1::regclass, NULL, date_trunc(\'hour\', $2::timestamptz, \'UTC\'))', [rel, cutoff]);
    }
    return { events: -1, sessions: -1 };
  }
  // Whole monthly partitions that end before the cutoff go at once; the rest row by row.
  const parts = await db.query<{ name: string; upper: string }>(
    `SELECT c.relname AS name, substring(pg_get_expr(c.relpartbound, c.oid) from 'TO \\(''([^'']+)''\\)') AS upper
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
     WHERE p.relname = 'events'`,
  );
  for (const p of parts.rows) {
    if (p.upper && new Date(p.upper) <= new Date(cutoff) && /^events_p\d{6}$/.test(p.name)) await dropPartition(db, p.name);
  }
  const ev = await db.query('DELETE FROM events WHERE created_at < $1', [cutoff]);
  // Not one visitor-log entry per session deleted: the projects' visit days are rebuilt instead.
  const se = await transaction(db, async (c) => {
    await c.query("SELECT set_config('tidemark.visitor_log', 'off', true)");
    // after a fold under way (its build could read the sessions about to go)
    await c.query('SELECT pg_advisory_xact_lock($1)', [VISITOR_LOCK]);
    const r = await c.query('DELETE FROM sessions WHERE started_at < $1', [cutoff]);
    if (r.rowCount) await forgetVisitorDays(c);
    return r;
  });
  return { events: ev.rowCount ?? 0, sessions: se.rowCount ?? 0 };
}

/**
 * Sessions went without their visitor-log entries (retention): every project's visit days
 * (sql/038) are rebuilt from the sessions left by the next fold (internal/store/visitor-days.ts);
 * their unique visitors are read as before until then.
 */
async function forgetVisitorDays(db: Pick<Pool, 'query'>): Promise<void> {
  await db.query('DELETE FROM visitor_state');
}

/**
 * Drops a partition of `events`, which takes an ACCESS EXCLUSIVE lock on `events`: waited for
 * at most PARTITION_LOCK_TIMEOUT_MS a few times (as PartitionKeeper creates them), so that a
 * long statement cannot queue every writer and reader behind the drop. Not granted: the
 * partition stays until the next run (the row-by-row delete that follows empties it).
 */
async function dropPartition(db: Pool, name: string): Promise<void> {
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      await transaction(db, async (c) => {
        await c.query(`SET LOCAL lock_timeout = ${PARTITION_LOCK_TIMEOUT_MS}`);
        await c.query(`DROP TABLE ${name}`);
      });
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '55P03') throw err;
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    }
  }
}

/** Open sessions idle for at least `idleMs` of wall time (the sweep's candidates). */
export interface IdleSession {
  sessionId: string;
  projectId: string;
  deviceId: string;
  updatedAtMs: number;
}

/**
 * Open sessions not written for `idleMs` of wall time, oldest first, at most `limit`, after
 * `after` (the last one of the page before: a keyset over sessions_open_idx).
 */
export async function idleOpenSessions(db: Pool, idleMs: number, limit = 1000, after?: { updatedAtMs: number; sessionId: string }): Promise<IdleSession[]> {
  const r = await db.query<{ id: string; project_id: string; device_id: string; updated_at: Date }>(
    `SELECT id, project_id, device_id, updated_at FROM sessions
     WHERE NOT ended AND updated_at < now() - make_interval(secs => $1::float8 / 1000)
       AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3::timestamptz, $4::uuid))
     ORDER BY updated_at, id LIMIT $2`,
    [idleMs, limit, after ? new Date(after.updatedAtMs).toISOString() : null, after?.sessionId ?? null],
  );
  return r.rows.map((x) => ({ sessionId: x.id, projectId: x.project_id, deviceId: x.device_id, updatedAtMs: x.updated_at.getTime() }));
}

/** The last write (ms) of the open session written longest ago that is not idle yet (null: none). */
export async function oldestActiveOpenSession(db: Pool, idleMs: number): Promise<number | null> {
  const r = await db.query<{ at: Date | null }>(
    `SELECT min(updated_at) AS at FROM sessions
     WHERE NOT ended AND updated_at >= now() - make_interval(secs => $1::float8 / 1000)`,
    [idleMs],
  );
  return r.rows[0]?.at ? r.rows[0].at.getTime() : null;
}

/** Durable daily salts (see internal/ingest/identity.ts SaltKeeper). */
export function pgSaltStore(db: Pool) {
  return {
    async saltFor(day: string, candidate: string): Promise<string> {
      const r = await db.query<{ salt: string }>(
        `WITH ins AS (INSERT INTO device_salts (day, salt) VALUES ($1, $2) ON CONFLICT (day) DO NOTHING RETURNING salt)
         SELECT salt FROM ins UNION ALL SELECT salt FROM device_salts WHERE day = $1 LIMIT 1`,
        [day, candidate],
      );
      // A concurrent first writer committed after this statement's snapshot: read it now.
      const salt = r.rows[0]?.salt ?? (await db.query<{ salt: string }>('SELECT salt FROM device_salts WHERE day = $1', [day])).rows[0]?.salt;
      if (!salt) throw new Error(`no salt for ${day}`);
      return salt;
    },
    async prune(keepDays: string[]): Promise<number> {
      const r = await db.query('DELETE FROM device_salts WHERE NOT (day = ANY($1::date[]))', [keepDays]);
      return r.rowCount ?? 0;
    },
  };
}
