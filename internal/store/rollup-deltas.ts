// The delta of a refresh transaction (docs/rollups.md, sql/025_rollup_deltas.sql): the delta
// log rows the transaction consumes, the logged sessions and events as they were before and
// as they are now in two shadow schemas, the additive refresh functions run over each
// (rollup-recompute.ts), and the difference added into the real tables per the catalogue
// (rollup-catalogue.ts); the shadow tables themselves, and their vacuum after a round. The
// round that calls these is rollups.ts.
import type { PoolClient } from './db';
import { catalogueEntry, isCatalogued, measuresOf, ROLLUP_CATALOGUE, type RollupEntry } from './rollup-catalogue';
import { refreshHours } from './rollup-recompute';

/** Identifiers from rollup_registry are quoted before they reach SQL text. */
const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * The delta log rows this transaction consumes, into tm_d_rows_s and tm_d_rows_e: those of
 * the picked hours (a session's by its start hour, an event's by its own), and every row of
 * the sessions they name, so that each session's delta is computed whole (its events are
 * read together with it, before and after). Returns how many rows.
 */
export async function pickDeltaRows(c: PoolClient): Promise<number> {
  await c.query(`CREATE TEMP TABLE tm_d_sids ON COMMIT DROP AS
    SELECT s.session_id FROM public.rollup_delta_sessions s
    JOIN tm_pick k ON s.project_id = k.project_id AND s.started_at >= k.bucket AND s.started_at < k.bucket + interval '1 hour'
    UNION
    SELECT e.session_id FROM public.rollup_delta_events e
    JOIN tm_pick k ON e.project_id = k.project_id AND e.created_at >= k.bucket AND e.created_at < k.bucket + interval '1 hour'
    WHERE e.session_id IS NOT NULL`);
  await c.query('ANALYZE tm_d_sids');
  const s = await c.query(`CREATE TEMP TABLE tm_d_rows_s ON COMMIT DROP AS
    SELECT * FROM public.rollup_delta_sessions WHERE session_id IN (SELECT session_id FROM tm_d_sids)`);
  const e = await c.query(`CREATE TEMP TABLE tm_d_rows_e ON COMMIT DROP AS
    SELECT * FROM public.rollup_delta_events WHERE seq IN (
      SELECT seq FROM public.rollup_delta_events WHERE session_id IN (SELECT session_id FROM tm_d_sids)
      UNION
      SELECT d.seq FROM public.rollup_delta_events d
      JOIN tm_pick k ON d.project_id = k.project_id AND d.created_at >= k.bucket AND d.created_at < k.bucket + interval '1 hour')`);
  return (s.rowCount ?? 0) + (e.rowCount ?? 0);
}

interface ColumnInfo {
  name: string;
  nullable: boolean;
}

/** The columns of each relation, in one catalog query. */
async function columnsOf(c: PoolClient, relations: string[]): Promise<Map<string, ColumnInfo[]>> {
  const r = await c.query<{ rel: string; name: string; nullable: boolean }>(
    `SELECT cl.relname AS rel, a.attname AS name, NOT a.attnotnull AS nullable
     FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY cl.relname, a.attnum`, [relations]);
  const m = new Map<string, ColumnInfo[]>();
  for (const x of r.rows) m.set(x.rel, [...(m.get(x.rel) ?? []), { name: x.name, nullable: x.nullable }]);
  return m;
}

/** The schemas that shadow sessions, events and the rollup tables in a delta's two runs. */
const BEFORE = 'tm_delta_before';
const AFTER = 'tm_delta_after';
const SHADOWED_SOURCES = ['sessions', 'events', 'rollup_invalidations'];
/**
 * Columns of sessions that no refresh function reads (test/rollup-catalogue-schema.test.ts
 * checks their bodies): a change to them alone changes no rollup.
 */
export const UNREAD_SESSION_COLUMNS = ['ended', 'updated_at', 'step_names', 'step_first_at', 'step_last_at'];
/** The shadow sources' columns analyzed before a delta's runs (see applyDeltas). */
const ANALYZED: Record<string, string[]> = {
  sessions: ['project_id', 'id', 'started_at', 'is_bot'],
  events: ['project_id', 'session_id', 'created_at', 'name'],
};

/**
 * The shadow tables: unlogged copies of the sources and of every catalogued table, in two
 * schemas, made once and remade when the columns of what they copy change (their signature
 * is the schemas' comment). Only the refresh uses them, one at a time (REFRESH_LOCK, rollups.ts).
 */
async function ensureShadows(c: PoolClient, relations: string[]): Promise<void> {
  const all = [...SHADOWED_SOURCES, ...relations];
  const sig = (await c.query<{ sig: string; stored: string | null }>(
    `SELECT md5(string_agg(cl.relname || ':' || a.attname || ':' || a.atttypid::text, ',' ORDER BY cl.relname, a.attnum)) AS sig,
            obj_description(to_regnamespace($2), 'pg_namespace') AS stored
     FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped`, [all, AFTER])).rows[0]!;
  if (sig.stored === sig.sig) return;
  const ddl: string[] = [];
  for (const schema of [BEFORE, AFTER]) {
    ddl.push(`DROP SCHEMA IF EXISTS ${schema} CASCADE;`, `CREATE SCHEMA ${schema};`);
    for (const rel of all) ddl.push(`CREATE UNLOGGED TABLE ${schema}.${ident(rel)} (LIKE public.${ident(rel)} INCLUDING DEFAULTS);`);
  }
  ddl.push(`COMMENT ON SCHEMA ${AFTER} IS '${sig.sig}';`);
  await c.query(ddl.join('\n'));
}

/**
 * Applies every pending delta (the log rows visible in this snapshot, then deleted): the
 * logged sessions and events as they were before (the earliest logged state) go into the
 * shadow schema tm_delta_before, as they are now into tm_delta_after; each additive refresh
 * function runs for every hour those rows touch, once with each schema first in the search
 * path, so it reads the shadow sessions and events and writes the shadow rollup tables. The
 * difference (after - before) is added to the real tables, into hours that await no
 * recompute and days that are built (catalogue `days`). `serviceOnly`: the delta was new
 * session_start / session_end rows alone, so only the tables that count them were computed.
 */
export async function applyDeltas(
  c: PoolClient,
  fnRelations: Map<string, string[]>,
): Promise<{ sketchHours: { project_id: string; bucket: Date }[]; serviceOnly: boolean }> {
  const additive = [...fnRelations].filter(([, rels]) => rels.every(isCatalogued));
  const relations = additive.flatMap(([, rels]) => rels);
  await ensureShadows(c, relations);
  const shadows = [...SHADOWED_SOURCES, ...relations];
  await c.query([BEFORE, AFTER].flatMap((schema) => shadows.map((t) => `DELETE FROM ${schema}.${ident(t)};`)).join('\n'));

  // The rows pickDeltaRows took for this transaction (not every logged row: a round is bounded).
  await c.query(`CREATE TEMP TABLE tm_d_sessions ON COMMIT DROP AS
    SELECT DISTINCT ON (session_id) project_id, session_id, started_at, old FROM tm_d_rows_s ORDER BY session_id, seq`);
  await c.query(`CREATE TEMP TABLE tm_d_events ON COMMIT DROP AS
    SELECT DISTINCT ON (created_at, event_id) project_id, event_id, created_at, session_id, op, old
    FROM tm_d_rows_e ORDER BY created_at, event_id, seq`);
  // A session whose row changed only in columns no rollup reads (UNREAD_SESSION_COLUMNS: its
  // idle end sets `ended`) and whose events changed only by its session_end rows being
  // inserted contributes the same to every session rollup before and after: it is left out,
  // and its session_end rows count as logged events of their own. An ended session was
  // otherwise computed whole, twice, with every event of it and its day's pairs: the usual
  // delta of a live hour, since a session ends 30 minutes after its last event.
  // (The worker logs no such session itself: this is for one it could not tell. Skipped when
  // no session is logged, the usual round of idle ends: planned before the temporary table
  // has statistics, the statement took ~80 ms for none in bench/rollup-cost.ts.)
  if ((await c.query('SELECT 1 FROM tm_d_sessions LIMIT 1')).rowCount) await c.query(`DELETE FROM tm_d_sessions d USING public.sessions s
    WHERE s.started_at = d.started_at AND s.id = d.session_id AND d.old IS NOT NULL
      AND (to_jsonb(s) - $1::text[]) = (d.old - $1::text[])
      AND d.session_id NOT IN (SELECT e.session_id FROM tm_d_events e
                               LEFT JOIN public.events pe ON pe.created_at = e.created_at AND pe.id = e.event_id
                               WHERE e.session_id IS NOT NULL AND (e.op <> 'i' OR pe.name IS DISTINCT FROM 'session_end'))`,
    [UNREAD_SESSION_COLUMNS]);
  // Every hour awaiting a recompute in this snapshot, and every hour this transaction
  // recomputes (a delta hour promoted to one: rollups.ts): its recompute covers its deltas.
  await c.query(`CREATE TEMP TABLE tm_rebuild ON COMMIT DROP AS
    SELECT project_id, bucket FROM public.rollup_invalidations WHERE rebuild
    UNION SELECT project_id, bucket FROM tm_pick WHERE recompute`);
  // Nothing of theirs is computed: the sessions that start in such an hour (every session
  // rollup row of theirs is in it), then the logged events in one that belong to no session
  // still computed here (an event of a computed session stays: its session is read whole).
  await c.query(`DELETE FROM tm_d_sessions d USING tm_rebuild r
    WHERE r.project_id = d.project_id AND r.bucket = date_trunc('hour', d.started_at, 'UTC')`);
  await c.query(`DELETE FROM tm_d_events d USING tm_rebuild r
    WHERE r.project_id = d.project_id AND r.bucket = date_trunc('hour', d.created_at, 'UTC')
      AND (d.session_id IS NULL OR d.session_id NOT IN (SELECT session_id FROM tm_d_sessions))`);
  // Row counts for the planner: the joins below must take the events by index, whatever the hour's size.
  await c.query('ANALYZE tm_d_sessions, tm_d_events, tm_rebuild');
  // A round whose only changes are new session_start / session_end rows (an idle session's
  // end, its session left out above) changes only the tables that count those (catalogue
  // `serviceEvents`): only their functions run, and only those tables are merged.
  const serviceOnly = (await c.query<{ only: boolean }>(
    `SELECT NOT EXISTS (SELECT 1 FROM tm_d_sessions) AND NOT EXISTS (
       SELECT 1 FROM tm_d_events d LEFT JOIN public.events e ON e.created_at = d.created_at AND e.id = d.event_id
       WHERE d.op <> 'i' OR e.name IS NULL OR e.name <> ALL (ARRAY['session_start', 'session_end']::text[])) AS only`,
  )).rows[0]!.only;
  const run = serviceOnly ? additive.filter(([, rels]) => rels.some((r) => catalogueEntry(r)?.serviceEvents)) : additive;
  const reached = serviceOnly
    ? [...new Set(run.flatMap(([, rels]) => rels).flatMap((r) => {
      const e = catalogueEntry(r);
      return e?.serviceEvents ? [r, ...(e.days ? [e.days] : [])] : [];
    }))]
    : relations;
  // After: every event of a logged session and every logged event, as they are now.
  await c.query(`INSERT INTO ${AFTER}.events
    SELECT DISTINCT ON (x.created_at, x.id) x.* FROM (
      SELECT e.* FROM public.events e JOIN tm_d_sessions d ON e.session_id = d.session_id AND e.project_id = d.project_id
      UNION ALL
      SELECT e.* FROM public.events e JOIN tm_d_events d ON e.created_at = d.created_at AND e.id = d.event_id
    ) x ORDER BY x.created_at, x.id`);
  await c.query(`INSERT INTO ${AFTER}.sessions SELECT s.* FROM public.sessions s
    JOIN tm_d_sessions d ON s.started_at = d.started_at AND s.id = d.session_id`);
  // Before: the earliest logged row of each session (none: it is new); the events without
  // those logged (an insert was not there, a change or deletion was as logged).
  await c.query(`INSERT INTO ${BEFORE}.sessions SELECT (jsonb_populate_record(NULL::public.sessions, d.old)).*
    FROM tm_d_sessions d WHERE d.old IS NOT NULL`);
  await c.query(`INSERT INTO ${BEFORE}.events
    SELECT n.* FROM ${AFTER}.events n WHERE NOT EXISTS (SELECT 1 FROM tm_d_events d WHERE d.created_at = n.created_at AND d.event_id = n.id)
    UNION ALL
    SELECT (jsonb_populate_record(NULL::public.events, d.old)).* FROM tm_d_events d WHERE d.op IN ('u', 'd')`);
  // The shadow sources' row counts for the planner (ANALYZE counts this transaction's own
  // inserts). Without them every shadow table looks like one row, and the refresh functions'
  // joins run as nested loops: the pages rows of a 1,000-session hour read the hour's views
  // once per session (1.25 s of a 1.3 s delta in bench/rollup-cost.ts, 3.3 million rows).
  // Only the columns the functions join and filter on: every column's statistics cost 160 ms
  // a delta of 13k events (the properties' jsonb), these a fraction.
  await c.query(`ANALYZE ${[BEFORE, AFTER].flatMap((schema) => Object.entries(ANALYZED).map(([t, cols]) => `${schema}.${ident(t)} (${cols.join(', ')})`)).join(', ')}`);
  const { rows: hours } = await c.query<{ project_id: string; bucket: Date }>(`
    SELECT DISTINCT project_id, bucket FROM (
      SELECT project_id, date_trunc('hour', started_at, 'UTC') AS bucket FROM ${BEFORE}.sessions
      UNION ALL SELECT project_id, date_trunc('hour', started_at, 'UTC') FROM ${AFTER}.sessions
      UNION ALL SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM ${BEFORE}.events
      UNION ALL SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM ${AFTER}.events
    ) h ORDER BY bucket, project_id`);
  const path = (await c.query<{ search_path: string }>('SHOW search_path')).rows[0]!.search_path;
  for (const schema of [BEFORE, AFTER]) {
    // The functions' cached plans are made again for this search path.
    await c.query(`SET LOCAL search_path = ${schema}, ${path}`);
    await c.query('DISCARD PLANS');
    await refreshHours(c, run.map(([fn]) => fn), hours, false);
  }
  await c.query(`SET LOCAL search_path = ${path}`);
  await c.query('DISCARD PLANS');

  const columns = await columnsOf(c, reached);
  const keyed = new Set((await c.query<{ rel: string }>(
    `SELECT cl.relname AS rel FROM pg_index i JOIN pg_class cl ON cl.oid = i.indrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND i.indisprimary`, [reached])).rows.map((r) => r.rel));
  // A kept table never ANALYZEd (new, or autovacuum off) has no statistics: the planner would
  // take any of its indexes for as selective as another when a delta probes it. Once per table
  // (reltuples is -1 until the first ANALYZE or VACUUM; pg_class needs no superuser, unlike
  // pg_statistic).
  const unanalyzed = await c.query<{ rel: string }>(
    `SELECT cl.relname AS rel FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND cl.relkind = 'r' AND cl.reltuples < 0`,
    [reached.filter((r) => catalogueEntry(r))]);
  if (unanalyzed.rows.length) await c.query(`ANALYZE ${unanalyzed.rows.map((r) => `public.${ident(r.rel)}`).join(', ')}`);
  for (const rel of reached) {
    const entry = catalogueEntry(rel);
    if (entry) await mergeDelta(c, entry, columns.get(rel) ?? [], keyed.has(rel));
  }
  if (reached.includes('event_properties_raw_hours')) {
    // A numeric text too long for numeric: the key's hour is read raw, and keeps no rows.
    await c.query(`INSERT INTO public.event_properties_raw_hours
      SELECT DISTINCT r.* FROM ${AFTER}.event_properties_raw_hours r
      WHERE NOT EXISTS (SELECT 1 FROM tm_rebuild x WHERE x.project_id = r.project_id AND x.bucket = r.bucket)
      ON CONFLICT DO NOTHING`);
    await c.query(`DELETE FROM public.event_properties_hourly h USING public.event_properties_raw_hours r
      WHERE h.project_id = r.project_id AND h.bucket = r.bucket AND h.key = r.key
        AND (r.project_id, r.bucket) IN (SELECT project_id, bucket FROM ${AFTER}.event_properties_raw_hours)`);
  }
  // A built day whose daily rows this delta could not reach (its bucket is not the local day
  // the project's timezone gives the hour now: the refresh functions build and the deltas
  // reach tm_local_day's) is no longer listed: reads take its hours. A delta that leaves a
  // table's day unchanged (a late screen view in the day of the uncharted events) reaches it
  // all the same.
  const daysTables = [...new Set(ROLLUP_CATALOGUE.map((e) => e.days).filter((d): d is string => !!d && reached.includes(d)))];
  for (const days of daysTables) {
    await c.query(`DELETE FROM public.${ident(days)} d
      WHERE EXISTS (SELECT 1 FROM unnest($1::text[], $2::timestamptz[]) AS h(p, b)
                    CROSS JOIN LATERAL public.tm_local_day(h.p, h.b) ld
                    WHERE h.p = d.project_id AND h.b >= d.bucket AND h.b < d.bucket + d.hours * interval '1 hour'
                      AND ld.d0 IS DISTINCT FROM d.bucket)`,
    [hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString())]);
  }

  // Hours whose sketches may have lost an element: a deleted event's, and the start hour of a
  // session whose profile changed.
  const { rows: sketchHours } = await c.query<{ project_id: string; bucket: Date }>(`
    SELECT project_id, bucket FROM (
      SELECT project_id, date_trunc('hour', created_at, 'UTC') AS bucket FROM tm_d_events WHERE op = 'd'
      UNION
      SELECT d.project_id, date_trunc('hour', d.started_at, 'UTC') FROM tm_d_sessions d
      JOIN public.sessions s ON s.started_at = d.started_at AND s.id = d.session_id
      WHERE d.old IS NOT NULL AND d.old ->> 'profile_id' IS DISTINCT FROM s.profile_id
    ) h WHERE NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = h.project_id AND r.bucket = h.bucket)`);

  await promoteUnbuiltDays(c, hours, daysTables);

  await c.query('DELETE FROM public.rollup_delta_sessions WHERE seq IN (SELECT seq FROM tm_d_rows_s)');
  await c.query('DELETE FROM public.rollup_delta_events WHERE seq IN (SELECT seq FROM tm_d_rows_e)');
  await c.query('DROP TABLE pg_temp.tm_d_sessions, pg_temp.tm_d_events, pg_temp.tm_rebuild');
  return { sketchHours, serviceOnly };
}

/**
 * A past local day that deltas reached but no recompute has built (a backfill into days that
 * were empty: every write to them was a delta) gets one of its hours logged for a recompute,
 * which builds the day's rows; after that, deltas keep it. Only days that are over, of whole
 * UTC hours (tm_local_day of sql/015, as the refresh functions build them), with no hour
 * awaiting a recompute already.
 */
async function promoteUnbuiltDays(c: PoolClient, hours: { project_id: string; bucket: Date }[], daysTables: string[]): Promise<void> {
  if (!daysTables.length || !hours.length) return;
  const unbuilt = daysTables.map((d) => `NOT EXISTS (SELECT 1 FROM public.${ident(d)} x WHERE x.project_id = h.p AND x.bucket = ld.d0)`).join(' OR ');
  await c.query(
    `INSERT INTO public.rollup_invalidations (project_id, bucket, shard, rebuild)
     SELECT h.p, max(h.b), -1, true
     FROM unnest($1::text[], $2::timestamptz[]) AS h(p, b)
     CROSS JOIN LATERAL public.tm_local_day(h.p, h.b) ld
     WHERE ld.d0 IS NOT NULL
       AND ld.d1 <= date_trunc('hour', now())
       AND NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = h.p AND r.bucket >= ld.d0 AND r.bucket < ld.d1)
       AND (${unbuilt})
     GROUP BY h.p, ld.d0
     ON CONFLICT (project_id, bucket, shard) DO UPDATE SET rebuild = true, version = nextval('rollup_version_seq'), last_at = now()`,
    [hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString())],
  );
}

/** Adds (now - before) of one catalogued table into its real rows, where the bucket may take it. */
async function mergeDelta(c: PoolClient, e: RollupEntry, columns: ColumnInfo[], keyed: boolean): Promise<void> {
  const measures = measuresOf(e);
  const keys = columns.filter((col) => !measures.has(col.name));
  const k = keys.map((col) => ident(col.name));
  const mins = e.mins ?? [];
  const maxes = e.maxes ?? [];
  const latest = e.latest?.cols ?? [];
  const unions = e.unions ?? [];
  // A row of the before-run carries NULL in every latest column: never the latest.
  const order = [...latest.slice(0, 1).map((col) => `(${ident(col)} IS NULL)`), ...(e.latest?.by ?? []).map((b) => `${ident(b)} DESC NULLS LAST`)].join(', ');
  const now = [...k, ...e.sums.map(ident), ...mins.map(ident), ...maxes.map(ident), ...latest.map(ident), ...unions.map(ident)].join(', ');
  const before = [...k, ...e.sums.map((m) => `-${ident(m)}`), ...[...mins, ...maxes, ...latest, ...unions].map(() => 'NULL')].join(', ');
  const combine = [
    ...k,
    ...e.sums.map((m) => `sum(${ident(m)}) AS ${ident(m)}`),
    ...mins.map((m) => `min(${ident(m)}) AS ${ident(m)}`),
    ...maxes.map((m) => `max(${ident(m)}) AS ${ident(m)}`),
    ...latest.map((m) => `(array_agg(${ident(m)} ORDER BY ${order}))[1] AS ${ident(m)}`),
    ...unions.map((m) => `hll_union_agg(${ident(m)}) AS ${ident(m)}`),
  ].join(', ');
  const measureList = [...e.sums, ...mins, ...maxes, ...latest, ...unions];
  const cols = [...k, ...measureList.map(ident)].join(', ');
  const keep = e.presence ? `sum(${ident(e.presence)}) > 0` : unions.map((m) => `bool_or(${ident(m)} IS NOT NULL)`).join(' AND ');
  const eligible = e.grain === 'hour'
    ? 'NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = x.project_id AND r.bucket = x.bucket)'
    : e.days
      ? `EXISTS (SELECT 1 FROM public.${ident(e.days)} dd WHERE dd.project_id = x.project_id AND dd.bucket = x.bucket
           AND NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = dd.project_id
                           AND r.bucket >= dd.bucket AND r.bucket < dd.bucket + dd.hours * interval '1 hour'))`
      : `NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = x.project_id
           AND r.bucket >= x.bucket AND r.bucket < x.bucket + interval '1 day')`;
  const match = keys.map((col) => col.nullable
    ? `t.${ident(col.name)} IS NOT DISTINCT FROM d.${ident(col.name)}`
    : `t.${ident(col.name)} = d.${ident(col.name)}`).join(' AND ');
  const rel = ident(e.relation);
  // The delta rows in an ANALYZEd temporary table, not a CTE: without their statistics the
  // planner takes (project_id, bucket) for a selective join key and joins each delta row to
  // every stored row of its hour (a merge join on that prefix, or a nested loop probing the
  // bucket index), quadratic in a large hour (40 events of 35,000 numeric properties: 1.5M
  // rows, more than 18 minutes); with them it probes the stored rows by their whole key.
  await c.query(`CREATE TEMP TABLE tm_d_merge ON COMMIT DROP AS
      SELECT ${combine} FROM (
        SELECT ${now} FROM ${AFTER}.${rel}
        UNION ALL
        SELECT ${before} FROM ${BEFORE}.${rel}
      ) x
      WHERE ${eligible}
      GROUP BY ${k.join(', ')}`);
  await c.query('ANALYZE pg_temp.tm_d_merge');
  // Without one (the cubes and pair tables), the stored rows of the delta's buckets are read
  // once, by index (the buckets as constant arrays), and hashed against the delta rows on
  // their whole key. Probing the (project, bucket) index once per delta row instead read the
  // bucket's every row per delta row: 1,400 session-end rows merged into three hours of
  // event_cube_hourly took 500 ms (bench/rollup-cost.ts).
  // A table with a primary key (its whole key: test/rollup-catalogue-schema.test.ts) takes the
  // delta rows by index lookups, as before: a few late rows into a 400,000-event hour must not
  // read the hour.
  if (keyed) {
    await c.query(`
      WITH d AS NOT MATERIALIZED (SELECT * FROM pg_temp.tm_d_merge),
      o AS (DELETE FROM public.${rel} t USING d WHERE ${match} RETURNING ${[...keys.map((col) => col.name), ...measureList].map((m) => `t.${ident(m)}`).join(', ')})
      INSERT INTO public.${rel} (${cols})
      SELECT ${combine} FROM (SELECT ${cols} FROM o UNION ALL SELECT ${cols} FROM d) x
      GROUP BY ${k.join(', ')}
      HAVING ${keep}`);
    await c.query('DROP TABLE pg_temp.tm_d_merge');
    return;
  }
  const b = (await c.query<{ p: string[]; b: string[] }>(
    'SELECT array_agg(DISTINCT project_id) AS p, array_agg(DISTINCT bucket::text) AS b FROM pg_temp.tm_d_merge')).rows[0]!;
  if (b.p?.length) {
    await c.query('SET LOCAL enable_nestloop = off');
    await c.query(`
      WITH d AS NOT MATERIALIZED (SELECT * FROM pg_temp.tm_d_merge),
      o AS (DELETE FROM public.${rel} t USING d WHERE t.project_id = ANY($1::text[]) AND t.bucket = ANY($2::timestamptz[]) AND ${match}
            RETURNING ${[...keys.map((col) => col.name), ...measureList].map((m) => `t.${ident(m)}`).join(', ')})
      INSERT INTO public.${rel} (${cols})
      SELECT ${combine} FROM (SELECT ${cols} FROM o UNION ALL SELECT ${cols} FROM d) x
      GROUP BY ${k.join(', ')}
      HAVING ${keep}`, [b.p, b.b]);
    await c.query('SET LOCAL enable_nestloop = on');
  }
  await c.query('DROP TABLE pg_temp.tm_d_merge');
}

/**
 * Every transaction that applies deltas empties the shadow tables with DELETE (cheap on
 * their few rows; TRUNCATE of ~130 tables cost 50-400 ms a transaction): their dead rows are
 * vacuumed here, after the round's transactions, once there are enough of them, so a long
 * backlog (many transactions) does not leave every scan of a shadow table reading dead rows
 * when autovacuum is slow or off (seen with autovacuum off: 570,000 dead rows in one shadow
 * table after an hour of backlog, and one call of the refresh functions over 12 hours grown
 * from a few seconds to over 20).
 */
export async function vacuumShadows(c: PoolClient): Promise<void> {
  const { rows } = await c.query<{ rel: string }>(
    `SELECT format('%I.%I', schemaname, relname) AS rel FROM pg_stat_all_tables
     WHERE schemaname IN ($1, $2) AND n_dead_tup >= 1000 ORDER BY 1`, [BEFORE, AFTER]);
  if (rows.length) await c.query(`VACUUM (SKIP_LOCKED) ${rows.map((r) => r.rel).join(', ')}`);
}
