// The one place that says which raw sessions an insights query counts. Metrics and
// breakdowns on the raw path aggregate over it; pages joins its screen views to it. The
// rollup path (rollups.ts) counts the same sessions: bots excluded, started in the
// period, from the rollups for settled hours and from this table for the others.
import { RESERVED_EVENT_NAMES } from '../model/event';
import { compileAll, type SplitFilters, type SqlParams } from '../query/filters';

export interface SessionScope {
  projectId: string;
  /** Sessions that START in [start, end) belong to the period. */
  start: Date;
  end: Date;
  filters: SplitFilters;
}

interface ScopeOptions {
  /**
   * Keep only sessions with at least one event (session_start/end excluded) that meets
   * all event-level filters. Pages applies those filters to each view instead.
   */
  applyEventFilters: boolean;
}

/**
 * A SELECT of the `sessions` rows (all columns, alias `s`) in scope: this project, not
 * bots, started in the period, meeting the session-level filters (and, if asked, the
 * event-level ones). Values are added to `params`.
 */
export function scopedSessionsSql(scope: SessionScope, params: SqlParams, options: ScopeOptions): string {
  const conditions = [
    `s.project_id = ${params.add(scope.projectId)}`,
    `s.started_at >= ${params.add(scope.start.toISOString())}::timestamptz`,
    `s.started_at < ${params.add(scope.end.toISOString())}::timestamptz`,
    'NOT s.is_bot',
  ];
  if (scope.filters.session.length > 0) conditions.push(compileAll(scope.filters.session, 's', params));
  if (options.applyEventFilters && scope.filters.event.length > 0) {
    conditions.push(`EXISTS (
      SELECT 1 FROM events e
      WHERE e.session_id = s.id
        AND e.project_id = s.project_id
        AND e.created_at >= s.started_at
        AND e.name <> ALL(${params.add([...RESERVED_EVENT_NAMES])}::text[])
        AND ${compileAll(scope.filters.event, 'e', params)}
    )`);
  }
  return `SELECT s.* FROM sessions s WHERE ${conditions.join('\n    AND ')}`;
}
