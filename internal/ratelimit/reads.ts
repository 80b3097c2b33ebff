// The read gate (insights, export, /live): revocation and the client's read rate limit, with
// /live also the project's live count, in one Redis round trip per request. Why apart: reads
// always ask Redis (their limits span minutes), unlike ingest's local token buckets.
import type { RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS, toResult, type GateResult } from './common';
import type { GateCommands } from './scripts';

/** `limit` requests per `windowMs` for the client, and whether Redis' set holds it revoked. */
export async function readGate(cmd: GateCommands, keys: RedisKeys, clientId: string, limit: number, windowMs: number, nowMs: number): Promise<GateResult> {
  const r = (await cmd.tmReadGate(
    keys.rate('read', clientId),
    keys.revoked,
    limit, clientId, windowMs, nowMs - LIVE_WINDOW_MS, keys.rateSeq,
  )) as [number, number, number];
  return toResult(r, limit, windowMs, '');
}

/** readGate plus the project's live visitors; `live` is null unless the outcome is 'ok'. */
export async function readLiveGate(cmd: GateCommands, keys: RedisKeys, clientId: string, limit: number, windowMs: number, nowMs: number, projectId: string): Promise<{ result: GateResult; live: number | null }> {
  const r = (await cmd.tmReadLiveGate(
    keys.rate('read', clientId),
    keys.revoked,
    keys.live(projectId),
    limit, clientId, windowMs, nowMs - LIVE_WINDOW_MS, keys.rateSeq,
  )) as [number, number, number, number];
  const result = toResult(r, limit, windowMs, '');
  return { result, live: result.outcome === 'ok' ? Number(r[3]) : null };
}
