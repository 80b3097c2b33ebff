-- Indexes for OpenPanel's group routes (internal/insights/groups.ts). Migrations run in a
-- transaction, so these build with a plain CREATE INDEX, which blocks writes to the table
-- meanwhile; on a large live table create them beforehand with CREATE INDEX CONCURRENTLY under
-- these names, and IF NOT EXISTS makes this migration a no-op.
--
-- profiles_groups_idx: a group's members (profiles whose groups hold its id) without reading
-- every profile of the project. Partial: profiles in no group (most) are not in it, and their
-- writes do not maintain it.
CREATE INDEX IF NOT EXISTS profiles_groups_idx ON profiles USING gin (groups) WHERE groups <> '{}';

-- groups_project_created_idx: a project's groups newest first, read up to the asked limit.
CREATE INDEX IF NOT EXISTS groups_project_created_idx ON groups (project_id, created_at DESC, id COLLATE "C");
