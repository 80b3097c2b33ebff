// Profile and group operations (identify, increment/decrement, group, assign_group), applied
// in order inside the worker's shard transaction (writes.ts commitShardBatch).
import type { QueuedAssignGroup, QueuedGroup, QueuedIdentify, QueuedIncrement } from '../model/event';
import type { PoolClient } from './db';

export type ProfileOp = QueuedIdentify | QueuedIncrement | QueuedGroup | QueuedAssignGroup;

export interface OpFailure {
  opId: string;
  projectId: string;
  kind: string;
  reason: string;
}

/** `stats.logins` -> ['stats', 'logins'] (OpenPanel's property.split('.')); a name without a dot is one key. */
export function propertyPath(property: string): string[] {
  return property.split('.');
}

/**
 * `doc` (a jsonb SQL expression) with every object on the way to path $3 made to exist
 * (missing ones become {}), then the number $4 plus the value at $3 (missing or JSON null:
 * 0) written at $3. Only used where the way holds objects and the value is a number.
 */
const incremented = (doc: string) => `(
  WITH RECURSIVE way(k, d) AS (
    SELECT 0, ${doc}
    UNION ALL
    SELECT k + 1, jsonb_set(d, ($3::text[])[1:k + 1], coalesce(d #> ($3::text[])[1:k + 1], '{}'::jsonb))
    FROM way WHERE k < cardinality($3::text[]) - 1
  )
  SELECT jsonb_set(d, $3::text[], to_jsonb(coalesce((${doc} #>> $3::text[])::numeric, 0) + $4::numeric))
  FROM way WHERE k = cardinality($3::text[]) - 1)`;

/** Every value on the way to $3 (its prefixes) is an object or missing. */
const wayIsObjects = (doc: string) =>
  `NOT EXISTS (SELECT 1 FROM generate_series(1, cardinality($3::text[]) - 1) g(k)
     WHERE coalesce(jsonb_typeof(${doc} #> ($3::text[])[1:g.k]), 'object') <> 'object')`;

/** The value at $3 can be incremented: missing, JSON null, a number, or a string holding a decimal number. */
const targetIsNumeric = (doc: string) =>
  `(coalesce(jsonb_typeof(${doc} #> $3::text[]), 'null') IN ('number', 'null')
     OR (jsonb_typeof(${doc} #> $3::text[]) = 'string' AND ${doc} #>> $3::text[] ~ '^\\s*-?[0-9]+(\\.[0-9]+)?\\s*$'))`;

/**
 * increment/decrement of a (possibly nested) property, atomic in one statement: a missing
 * profile is created, missing objects on the way are created. A value on the way that is not
 * an object, or a target that is not numeric, leaves the profile as it was; `ok` is then
 * false (after the statement, the way holds objects and the target a number exactly when it
 * applied).
 */
const INCREMENT_SQL = `INSERT INTO profiles AS p (project_id, id, properties)
  VALUES ($1, $2, ${incremented("'{}'::jsonb")})
  ON CONFLICT (project_id, id) DO UPDATE SET
    properties = CASE WHEN ${wayIsObjects('p.properties')} AND ${targetIsNumeric('p.properties')}
                      THEN ${incremented('p.properties')}
                      ELSE p.properties END,
    updated_at = now()
  RETURNING ${wayIsObjects('properties')} AND coalesce(jsonb_typeof(properties #> $3::text[]) = 'number', false) AS ok`;

/**
 * Applies profile and group operations in order; returns the ones that could not apply.
 * `guarded` (the worker's retry of a message PostgreSQL refused as data): each op runs under
 * a savepoint, and one that PostgreSQL refuses as data (a profile whose merged properties
 * would pass jsonb's 256 MB, say: what it holds already is not the API's to check) is set
 * aside alone, recorded in op_failures, while the rest of its message commits. Not on the
 * first try: two more round trips per op, for a case that needs a hostile client.
 */
export async function applyProfileOps(c: PoolClient, ops: ProfileOp[], opts: { guarded?: boolean } = {}): Promise<OpFailure[]> {
  const failures: OpFailure[] = [];
  for (const op of ops) {
    if (!opts.guarded) {
      const f = await applyOne(c, op);
      if (f) failures.push(f);
      continue;
    }
    await c.query('SAVEPOINT profile_op');
    try {
      const f = await applyOne(c, op);
      if (f) failures.push(f);
      await c.query('RELEASE SAVEPOINT profile_op');
    } catch (err) {
      if (!isDataError(err)) throw err;
      await c.query('ROLLBACK TO SAVEPOINT profile_op');
      failures.push({ opId: op.id, projectId: op.projectId, kind: op.kind, reason: `PostgreSQL refused it: ${(err as Error).message}` });
    }
  }
  await recordOpFailures(c, failures.map((f) => ({ ...f, op: ops.find((o) => o.id === f.opId) })));
  return failures;
}

/** What PostgreSQL refused must still be storable in op_failures: no NUL, no lone surrogates. */
const storableText = (v: string) =>
  v.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\u0000|\\u0000|\\ud[89a-f][0-9a-f]{2}/gi, '');

/** Keeps ops that were not applied in op_failures, each with its reason and the op as queued. */
export async function recordOpFailures(c: PoolClient, failures: (OpFailure & { op: unknown })[]): Promise<void> {
  if (!failures.length) return;
  await c.query(
    `INSERT INTO op_failures (op_id, project_id, kind, reason, payload)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[]) ON CONFLICT DO NOTHING`,
    [failures.map((f) => storableText(f.opId)), failures.map((f) => storableText(f.projectId)), failures.map((f) => storableText(f.kind)),
      failures.map((f) => storableText(f.reason)), failures.map((f) => storableText(JSON.stringify(f.op)))],
  );
}

/** PostgreSQL refused the data itself (not the connection): retrying cannot help. */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^(22|23|54)/.test(code);
}

/** One op; its failure when it could not apply (a non-numeric increment target). */
async function applyOne(c: PoolClient, op: ProfileOp): Promise<OpFailure | null> {
  switch (op.kind) {
    case 'identify':
      await c.query(
        `INSERT INTO profiles AS p (project_id, id, first_name, last_name, email, properties)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb)
         ON CONFLICT (project_id, id) DO UPDATE SET
           first_name = coalesce(EXCLUDED.first_name, p.first_name),
           last_name = coalesce(EXCLUDED.last_name, p.last_name),
           email = coalesce(EXCLUDED.email, p.email),
           properties = p.properties || EXCLUDED.properties,
           updated_at = now()`,
        [op.projectId, op.profileId, op.firstName, op.lastName, op.email, JSON.stringify(op.properties)],
      );
      break;
    case 'increment': {
      // A value that cannot be incremented is left alone and reported, never a crash.
      const r = await c.query<{ ok: boolean }>(INCREMENT_SQL, [op.projectId, op.profileId, propertyPath(op.property), op.delta]);
      if (!r.rows[0]?.ok) {
        return {
          opId: op.id, projectId: op.projectId, kind: op.kind,
          reason: `property "${op.property}" holds a non-numeric value (or a non-object on its path)`,
        };
      }
      break;
    }
    case 'group':
      await c.query(
        `INSERT INTO groups AS g (project_id, id, type, name, properties) VALUES ($1, $2, $3, $4, $5::jsonb)
         ON CONFLICT (project_id, id) DO UPDATE SET type = EXCLUDED.type, name = EXCLUDED.name,
           properties = g.properties || EXCLUDED.properties, updated_at = now()`,
        [op.projectId, op.groupId, op.type, op.name, JSON.stringify(op.properties)],
      );
      break;
    case 'assign_group':
      await c.query(
        `INSERT INTO profiles AS p (project_id, id, groups) VALUES ($1, $2, (SELECT array_agg(DISTINCT g ORDER BY g) FROM unnest($3::text[]) g))
         ON CONFLICT (project_id, id) DO UPDATE SET
           groups = (SELECT array_agg(DISTINCT g ORDER BY g) FROM unnest(p.groups || EXCLUDED.groups) g),
           updated_at = now()`,
        [op.projectId, op.profileId, op.groupIds],
      );
      break;
  }
  return null;
}
