// Retention deletes old raw rows and the rollup rows that counted them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv } from '../../test/support/harness';
import { applyRetention } from './maintenance';
import { refreshRollups } from './rollups';

test('retention removes old sessions and their rollup rows; recent ones stay', async () => {
  const env = await new TestEnv('retention').setup();
  try {
    const projectId = await env.project();
    const hour = (daysAgo: number) => new Date(Math.floor((Date.now() - daysAgo * 86_400_000) / 3_600_000) * 3_600_000);
    for (const [device, at] of [['old', hour(10)], ['new', hour(1)]] as const) {
      await env.db.query(
        `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country)
         VALUES (gen_random_uuid(), $1, $2, $2, $3, $3, 'DE')`,
        [projectId, device, at.toISOString()],
      );
      await env.db.query('INSERT INTO rollup_invalidations (project_id, bucket) VALUES ($1, $2)', [projectId, at.toISOString()]);
    }
    while ((await refreshRollups(env.db, false, { before: new Date(Date.now() + 86_400_000) })).buckets > 0);
    const count = async (sql: string) => Number((await env.db.query(sql)).rows[0].n);
    assert.equal(await count('SELECT sum(sessions) AS n FROM rollup_country_hourly'), 2);
    await applyRetention(env.db, 5);
    assert.equal(await count('SELECT count(*) AS n FROM sessions'), 1);
    assert.equal(await count('SELECT coalesce(sum(sessions), 0) AS n FROM rollup_country_hourly'), 1);
    assert.equal(await count('SELECT coalesce(sum(sessions), 0) AS n FROM rollup_sessions_hourly'), 1);
  } finally {
    await env.teardown();
  }
});
