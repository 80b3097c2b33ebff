// Idempotency keys on the worker side (docs/api.md "Idempotent retries"): at most one op per
// (project, key). The API derives a keyed op's id from the key, but an event that took its
// receipt time has a different created_at on every attempt, so the events primary key alone
// cannot drop a retried copy; ops are filtered by key before they are sessionized.
import type { QueuedOp } from '../model/event';
import { keyOf, type AppliedKey } from '../store/writes';

/**
 * The ops to apply, in order: an op whose key an earlier batch applied (`applied`, from
 * `appliedKeys`) is dropped, and of several ops with one key in this batch the first wins.
 * Returns the keys the kept ops record.
 */
export function keepFirstPerKey(ops: QueuedOp[], applied: Set<string>): { ops: QueuedOp[]; keys: AppliedKey[]; dropped: number } {
  const seen = new Set<string>();
  const kept: QueuedOp[] = [];
  const keys: AppliedKey[] = [];
  for (const op of ops) {
    if (op.dedupeKey === undefined) {
      kept.push(op);
      continue;
    }
    const k = keyOf(op.projectId, op.dedupeKey);
    if (applied.has(k) || seen.has(k)) continue;
    seen.add(k);
    kept.push(op);
    keys.push({ projectId: op.projectId, key: op.dedupeKey, opId: op.id });
  }
  return { ops: kept, keys, dropped: ops.length - kept.length };
}

/** The (project, key) pairs of a batch's keyed ops. */
export function keyedOf(ops: QueuedOp[]): { projectId: string; key: string }[] {
  const out: { projectId: string; key: string }[] = [];
  for (const op of ops) if (op.dedupeKey !== undefined) out.push({ projectId: op.projectId, key: op.dedupeKey });
  return out;
}
