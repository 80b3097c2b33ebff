// Turns the ops of one shard batch into the rows of one transaction: enrich each event,
// sessionize it by device, emit session_start/session_end, collect profile operations.
// The steps are named in op-steps.ts (OP_STEPS, SESSION_ROWS) over one OpBatch (op-batch.ts).
// Works on copies of the session states: the caller adopts them only after the commit.
import type { QueuedOp } from '../model/event';
import type { SessionState } from '../sessionize/session';
import { deviceKey, finishBatch, newOpBatch, type ProcessDeps, type ProcessedBatch, type SessionCache } from './op-batch';
import { applyOp, joinServerSide } from './op-steps';

export { deviceKey, type ProcessDeps, type ProcessedBatch } from './op-batch';
export { joinable } from './op-steps';

/** Event time of an op for ordering (receipt time for ops that are not events). */
const opTime = (op: QueuedOp): number => Date.parse(op.kind === 'track' ? op.createdAt : op.receivedAt);

/**
 * The ops in event time. Concurrent requests of one device can reach the stream slightly out
 * of order (the API awaits Redis before queueing): a stable sort restores each device's order.
 */
export function inEventOrder(input: readonly QueuedOp[]): QueuedOp[] {
  return input
    .map((op, i) => ({ op, i, t: opTime(op) }))
    .sort((a, b) => a.t - b.t || a.i - b.i)
    .map((x) => x.op);
}

/** The devices whose session the batch needs and the cache does not have, each once, in op order. */
export function devicesToLoad(ops: readonly QueuedOp[], cache: SessionCache): { projectId: string; deviceId: string }[] {
  const missing = new Map<string, { projectId: string; deviceId: string }>();
  for (const op of ops) {
    if (op.kind !== 'track' && op.kind !== 'session_check') continue;
    const k = deviceKey(op.projectId, op.deviceId);
    if (!cache.get(k)) missing.set(k, { projectId: op.projectId, deviceId: op.deviceId });
  }
  return [...missing.values()];
}

/** Their latest sessions from the store (one lookup, none when the cache has every device), by device key. */
async function loadStates(ops: readonly QueuedOp[], deps: ProcessDeps): Promise<Map<string, SessionState>> {
  const states = new Map<string, SessionState>();
  const missing = devicesToLoad(ops, deps.cache);
  if (missing.length) {
    for (const s of await deps.loadSessions(missing)) states.set(deviceKey(s.projectId, s.deviceId), s);
  }
  return states;
}

export async function processOps(input: QueuedOp[], deps: ProcessDeps): Promise<ProcessedBatch> {
  const ops = inEventOrder(input);
  const states = await loadStates(ops, deps); // sessions of the devices not in the cache
  const b = newOpBatch(deps, deps.nowMs(), states);
  for (const op of ops) applyOp(b, op); // OP_STEPS: the step for the op's kind
  joinServerSide(b); // server-side events join a session as the batch leaves it
  return finishBatch(b);
}
