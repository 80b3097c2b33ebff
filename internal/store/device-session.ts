// The session a device's next event would join, for GET /track/device-id (OpenPanel answers a
// device's live session id there). The sessionizer's rule (internal/sessionize/session.ts): an
// event continues the device's latest session when it comes less than the session timeout
// after that session's last event, ended or not.
import type { Pool } from './db';

/** The id of the device's latest session when its last event is less than `timeoutMs` before `nowMs`, else null. */
export async function liveSessionOf(db: Pool, projectId: string, deviceId: string, nowMs: number, timeoutMs: number): Promise<string | null> {
  // sessions_device_idx (project_id, device_id, started_at DESC): one index probe, as the
  // sessionizer's own loadLatestSessions (writes.ts) reads it.
  const r = await db.query<{ id: string; last: Date }>(
    `SELECT id::text AS id, last_event_at AS last FROM sessions
     WHERE project_id = $1 AND device_id = $2 ORDER BY started_at DESC LIMIT 1`,
    [projectId, deviceId],
  );
  const row = r.rows[0];
  if (!row) return null;
  return nowMs - new Date(row.last).getTime() < timeoutMs ? row.id : null;
}
