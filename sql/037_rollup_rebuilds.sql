-- The repair tool's progress: `cli rollups rebuild --project P --from T --to T` recomputes a
-- project's rollups of a span of hours from the raw rows (internal/store/rollup-rebuild.ts),
-- a chunk of hours at a time. Each finished chunk moves `next_at`, so a rebuild that was
-- stopped (a deploy, Ctrl-C, a lost connection) goes on from there when the same command runs
-- again; the row goes once the span is done. A chunk in progress when it stopped is logged in
-- rollup_invalidations: reads take its hours raw (exact) and the service's refresh recomputes
-- them meanwhile, so a stopped rebuild leaves nothing wrong behind, only work undone.
CREATE TABLE IF NOT EXISTS rollup_rebuilds (
  project_id  text NOT NULL,
  from_at     timestamptz NOT NULL,
  to_at       timestamptz NOT NULL,
  next_at     timestamptz NOT NULL,
  hours_done  integer NOT NULL DEFAULT 0,
  started_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, from_at, to_at),
  CHECK (from_at < to_at AND next_at >= from_at AND next_at <= to_at)
);
