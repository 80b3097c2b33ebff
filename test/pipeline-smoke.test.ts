// The shortest end-to-end path: a tracked page view becomes an event row, a session row
// and a number in /insights.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, post, get, track, waitFor } from './support/harness';

test('a page view goes from POST /track to events, sessions and /insights/metrics', async () => {
  const env = await new TestEnv('smoke').setup();
  const app = await startApp(env);
  try {
    const projectId = await env.project({ timezone: 'UTC' });
    const writer = await env.client(projectId, 'write');
    const reader = await env.client(projectId, 'read');
    const sent = await post(`${app.url}/track`, track('screen_view', { __path: 'https://a.example/x' }), writer, { ip: '1.1.1.1' });
    assert.equal(sent.status, 202);
    assert.match(sent.body.deviceId, /^[0-9a-f]{32}$/);
    const row = await waitFor(async () => (await env.db.query("SELECT * FROM events WHERE name = 'screen_view'")).rows[0], { what: 'event row' });
    assert.equal(row.path, '/x');
    assert.equal(row.device_id, sent.body.deviceId);
    const session = (await env.db.query('SELECT * FROM sessions')).rows[0];
    assert.equal(session.screen_view_count, 1);
    const m = await get(`${app.url}/insights/${projectId}/metrics?range=today`, reader);
    assert.equal(m.status, 200);
    assert.equal(m.body.metrics.total_sessions, 1);
    assert.equal(m.body.metrics.total_screen_views, 1);
    const live = await get(`${app.url}/insights/${projectId}/live`, reader);
    assert.deepEqual(live.body, { visitors: 1 });
  } finally {
    await app.drain();
    await env.teardown();
  }
});
