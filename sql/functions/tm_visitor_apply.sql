-- Folds up to p_limit entries of visitor_log (sql/038) into visitor_days and
-- visitor_day_returns, oldest first, in one statement (and a second that drops returns rows
-- that reached 0). Entries of a project without a visitor_state row (not built, or gone) are
-- dropped: its build (tm_visitor_build) reads its sessions. Run in a REPEATABLE READ
-- transaction under the visitors' advisory lock (internal/store/visitor-days.ts). Returns the
-- log entries taken (fewer than p_limit: the log is empty).
--
-- The entries summed per (profile, local day) change the days' session counts; a day a profile
-- gains (its first session that day) or loses (its last) changes the returns of that day and
-- of the profile's next visit day. For each profile with such a change, the pairs (day, the
-- visit day before it) from its first changed day on are taken as they were (-1) and as they
-- are now (+1), from its days since the visit day before the first change; their sum is the
-- change of visitor_day_returns (pairs further on are the same both ways and cancel). Every
-- part reads the statement's snapshot, so "as they were" is the tables before this statement.
CREATE OR REPLACE FUNCTION tm_visitor_apply(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $body$
DECLARE
  taken integer;
  zp text[];
  zd date[];
  zv date[];
BEGIN
  -- state rows of projects that are gone
  DELETE FROM visitor_state s WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = s.project_id);

  WITH took AS (
    DELETE FROM visitor_log l WHERE l.id IN (SELECT x.id FROM visitor_log x ORDER BY x.id LIMIT p_limit)
    RETURNING l.project_id, l.profile_id, l.started_at, l.delta
  ),
  g AS (
    SELECT t.project_id, t.profile_id, (t.started_at AT TIME ZONE s.zone)::date AS day, sum(t.delta)::integer AS delta
    FROM took t JOIN visitor_state s ON s.project_id = t.project_id
    GROUP BY 1, 2, 3
    HAVING sum(t.delta) <> 0
  ),
  ch AS (
    SELECT g.project_id, g.profile_id, g.day, coalesce(d.sessions, 0) AS cur, greatest(coalesce(d.sessions, 0) + g.delta, 0) AS now
    -- one primary-key probe each (LATERAL, kept by OFFSET 0): as a join, the planner hashed
    -- the whole table (195k rows at 1M events: half the statement's time)
    FROM g LEFT JOIN LATERAL (
      SELECT x.sessions FROM visitor_days x
      WHERE x.project_id = g.project_id AND x.profile_id = g.profile_id AND x.day = g.day OFFSET 0
    ) d ON true
  ),
  put AS (
    INSERT INTO visitor_days AS d (project_id, profile_id, day, sessions)
    SELECT ch.project_id, ch.profile_id, ch.day, ch.now FROM ch WHERE ch.now > 0 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, profile_id, day) DO UPDATE SET sessions = EXCLUDED.sessions
  ),
  gone AS (
    DELETE FROM visitor_days d USING ch
    WHERE ch.now = 0 AND ch.cur > 0 AND d.project_id = ch.project_id AND d.profile_id = ch.profile_id AND d.day = ch.day
  ),
  -- the days that join or leave a profile's visit days
  mv AS (SELECT ch.project_id, ch.profile_id, ch.day, ch.now > 0 AS joins FROM ch WHERE (ch.cur > 0) <> (ch.now > 0)),
  aff AS (
    SELECT a.project_id, a.profile_id, a.dmin,
           coalesce((SELECT max(d.day) FROM visitor_days d
                     WHERE d.project_id = a.project_id AND d.profile_id = a.profile_id AND d.day < a.dmin), '-infinity'::date) AS p0
    FROM (SELECT mv.project_id, mv.profile_id, min(mv.day) AS dmin FROM mv GROUP BY 1, 2) a
  ),
  was AS (
    SELECT a.project_id, a.profile_id, a.dmin, d.day
    FROM aff a JOIN visitor_days d ON d.project_id = a.project_id AND d.profile_id = a.profile_id AND d.day >= a.p0
  ),
  is_now AS (
    SELECT w.project_id, w.profile_id, w.dmin, w.day FROM was w
    WHERE NOT EXISTS (SELECT 1 FROM mv WHERE mv.project_id = w.project_id AND mv.profile_id = w.profile_id AND mv.day = w.day)
    UNION ALL
    SELECT mv.project_id, mv.profile_id, a.dmin, mv.day
    FROM mv JOIN aff a ON a.project_id = mv.project_id AND a.profile_id = mv.profile_id
    WHERE mv.joins
  ),
  pairs AS (
    SELECT x.project_id, x.day, x.prev_day, x.n FROM (
      SELECT w.project_id, w.dmin, w.day, coalesce(lag(w.day) OVER (PARTITION BY w.project_id, w.profile_id ORDER BY w.day), '-infinity'::date) AS prev_day, -1 AS n
      FROM was w
      UNION ALL
      SELECT i.project_id, i.dmin, i.day, coalesce(lag(i.day) OVER (PARTITION BY i.project_id, i.profile_id ORDER BY i.day), '-infinity'::date), 1
      FROM is_now i
    ) x
    WHERE x.day >= x.dmin
  ),
  net AS (
    SELECT pairs.project_id, pairs.day, pairs.prev_day, sum(pairs.n)::integer AS n
    FROM pairs GROUP BY 1, 2, 3 HAVING sum(pairs.n) <> 0
  ),
  ret AS (
    INSERT INTO visitor_day_returns AS r (project_id, day, prev_day, visitors)
    SELECT net.project_id, net.day, net.prev_day, net.n FROM net ORDER BY 1, 2, 3
    ON CONFLICT (project_id, day, prev_day) DO UPDATE SET visitors = r.visitors + EXCLUDED.visitors
    RETURNING r.project_id, r.day, r.prev_day, r.visitors
  )
  SELECT (SELECT count(*)::integer FROM took),
         array_agg(ret.project_id) FILTER (WHERE ret.visitors = 0),
         array_agg(ret.day) FILTER (WHERE ret.visitors = 0),
         array_agg(ret.prev_day) FILTER (WHERE ret.visitors = 0)
  INTO taken, zp, zd, zv
  FROM ret;

  IF zp IS NOT NULL THEN
    DELETE FROM visitor_day_returns r
    USING unnest(zp, zd, zv) AS z(p, d, v)
    WHERE r.project_id = z.p AND r.day = z.d AND r.prev_day = z.v AND r.visitors = 0;
  END IF;
  RETURN taken;
END
$body$;
