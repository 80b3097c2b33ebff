// How a shard batch's events go into `events` (the worker's transaction, writes.ts): COPY of
// their text rows, or, when one of them is stored already (a redelivery), an insert that skips
// stored rows; the COPY text encoding; the batch's events without repeats.
import type { EventRecord } from '../model/event';
import { SESSION_DIMENSIONS } from '../model/event';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import type { PoolClient } from './db';

const EVENT_COLUMNS = [
  ['id', 'uuid'], ['project_id', 'text'], ['name', 'text'], ['device_id', 'text'], ['profile_id', 'text'],
  ['session_id', 'uuid'], ['created_at', 'timestamptz'], ['properties', 'jsonb'], ['groups', 'text'],
  ['origin', 'text'], ['path', 'text'], ['title', 'text'],
  ...SESSION_DIMENSIONS.map((d) => [d, 'text'] as const),
  ['latitude', 'float8'], ['longitude', 'float8'], ['is_bot', 'bool'], ['bot_reason', 'text'], ['duration_ms', 'int8'],
] as const;

export function eventColumnValues(e: EventRecord): unknown[] {
  return [
    e.id, e.projectId, e.name, e.deviceId, e.profileId, e.sessionId, e.createdAt.toISOString(), JSON.stringify(e.properties),
    // text[] cannot be an element of an unnest() array: carried as JSON text and cast back.
    JSON.stringify(e.groups),
    e.origin, e.path, e.title,
    ...SESSION_DIMENSIONS.map((d) => e[d]),
    e.latitude, e.longitude, e.isBot, e.botReason, e.durationMs,
  ];
}

/** The fallback insert: skips rows whose (created_at, id) is stored already; returns the ids it inserted. */
export async function insertEventsSkippingStored(c: PoolClient, events: EventRecord[]): Promise<Set<string>> {
  if (!events.length) return new Set();
  const cols = EVENT_COLUMNS.map(([n]) => n);
  const columns: unknown[][] = cols.map(() => []);
  for (const e of events) eventColumnValues(e).forEach((v, i) => columns[i]!.push(v));
  const selects = EVENT_COLUMNS.map(([n], i) =>
    n === 'groups' ? `ARRAY(SELECT jsonb_array_elements_text(u.c${i}::jsonb))` : `u.c${i}`,
  );
  const unnest = EVENT_COLUMNS.map(([n, t], i) => `$${i + 1}::${n === 'groups' ? 'text' : t}[]`).join(', ');
  const aliases = EVENT_COLUMNS.map((_, i) => `c${i}`).join(', ');
  const r = await c.query<{ id: string; created_at: Date }>(
    `INSERT INTO events (${cols.join(', ')})
     SELECT ${selects.join(', ')} FROM unnest(${unnest}) AS u(${aliases})
     ON CONFLICT DO NOTHING RETURNING id, created_at`,
    columns,
  );
  return new Set(r.rows.map((x) => eventKey(x.id, x.created_at.getTime())));
}

export const eventKey = (id: string, createdAtMs: number): string => `${createdAtMs}\u0000${id}`;

/** A COPY text-format field: NULL as \N; backslash, newline, carriage return and tab escaped. */
export function copyField(v: unknown): string {
  if (v === null || v === undefined) return '\\N';
  return copyText(typeof v === 'boolean' ? (v ? 't' : 'f') : String(v));
}

const COPY_SPECIAL = /[\\\n\r\t]/;
const COPY_SPECIALS = /[\\\n\r\t]/g;
const copyEscape = (ch: string) => (ch === '\\' ? '\\\\' : ch === '\n' ? '\\n' : ch === '\r' ? '\\r' : '\\t');
/** Text as a COPY field: backslash, newline, carriage return and tab escaped (most text has none: no copy then). */
const copyText = (s: string): string => (COPY_SPECIAL.test(s) ? s.replace(COPY_SPECIALS, copyEscape) : s);
const copyNullable = (v: string | number | null): string => (v === null ? '\\N' : typeof v === 'number' ? String(v) : copyText(v));

/** A text[] literal: every element double-quoted, so any text survives. */
export function arrayLiteral(items: string[]): string {
  return `{${items.map((x) => `"${x.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`).join(',')}}`;
}

/**
 * The batch's events as COPY text rows, in EVENT_COLUMNS order (the values of
 * eventColumnValues, groups as a text[] literal). Written field by field: the worker's
 * hottest function when it built an array per row and ran a regex replace per field (a
 * sixth of its thread's time under load). writes.test.ts checks it against copyField over
 * eventColumnValues for random events.
 */
export function eventsCopyText(events: EventRecord[]): string {
  let out = '';
  for (const e of events) {
    out += copyText(e.id) + '\t' + copyText(e.projectId) + '\t' + copyText(e.name) + '\t' + copyText(e.deviceId) + '\t'
      + copyText(e.profileId) + '\t' + copyNullable(e.sessionId) + '\t' + e.createdAt.toISOString() + '\t'
      + copyText(JSON.stringify(e.properties)) + '\t' + copyText(arrayLiteral(e.groups)) + '\t'
      + copyText(e.origin) + '\t' + copyText(e.path) + '\t' + copyText(e.title);
    for (const d of SESSION_DIMENSIONS) out += '\t' + copyText(e[d]);
    out += '\t' + copyNullable(e.latitude) + '\t' + copyNullable(e.longitude) + '\t' + (e.isBot ? 't' : 'f') + '\t'
      + copyNullable(e.botReason) + '\t' + copyNullable(e.durationMs) + '\n';
  }
  return out;
}

/** COPY refused a row because its (created_at, id) is stored already: a redelivered event. */
export class EventStoredError extends Error {}

/**
 * COPY straight into events (the partition or chunk is routed by PostgreSQL): no per-row
 * conflict check. An event already stored makes it fail with a unique violation; the caller
 * then redoes the transaction with insertEventsSkippingStored (exactly once by event id).
 */
export async function copyEvents(c: PoolClient, events: EventRecord[]): Promise<Set<string>> {
  if (!events.length) return new Set();
  const sql = `COPY events (${EVENT_COLUMNS.map(([n]) => n).join(', ')}) FROM STDIN`;
  try {
    await pipeline(Readable.from([Buffer.from(eventsCopyText(events), 'utf8')]), c.query(copyFrom(sql)));
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw new EventStoredError('an event of this batch is stored already');
    throw err;
  }
  return new Set(events.map((e) => eventKey(e.id, e.createdAt.getTime())));
}

/** Drops repeats of one (created_at, id) within a batch, keeping the first (as ON CONFLICT DO NOTHING would). */
export function firstOfEachEvent(events: EventRecord[]): EventRecord[] {
  const seen = new Set<string>();
  return events.filter((e) => {
    const k = eventKey(e.id, e.createdAt.getTime());
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
