-- Open sessions by last activity: the periodic sweep finds idle sessions whose end check
-- was never scheduled (e.g. Redis was away right after the commit).
CREATE INDEX sessions_open_idx ON sessions (updated_at) WHERE NOT ended;
