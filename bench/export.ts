// Export latency at ~1M events (a benchmark, not part of npm test; no thresholds):
//   node --import tsx --test bench/export.ts
// (bench/export-queries.ts measures the same requests on bench/generate.ts databases at 1M and
// 10M and writes the "## Export queries" section of bench/RESULTS.md.)
// 1,000,000 events of one project over the last 30 days (plus 200,000 of another project)
// are written with generate_series; requests go through the real HTTP stack (exportRoutes).
import { test } from 'node:test';
import { streamEvents } from '../internal/export/events';
import { parseEventsParams } from '../internal/export/params';
import { refreshRollups } from '../internal/store/rollups';
import { get, TestEnv, type Credentials } from '../test/support/harness';
import { ensurePartitions, startExportServer } from '../test/support/export-server';

const N = Number(process.env.EXPORT_BENCH_EVENTS ?? 1_000_000);
const RUNS = Number(process.env.EXPORT_BENCH_RUNS ?? 30);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

test('export latency at ~1M events', { timeout: 3_600_000 }, async () => {
  const env = await new TestEnv('exportbench').setup();
  const server = await startExportServer(env, { queryTimeoutMs: 60_000 });
  try {
    const project = await env.project({ name: 'Bench', timezone: 'Europe/Berlin' });
    const other = await env.project({ name: 'Other', timezone: 'UTC' });
    const clients: Credentials[] = [];
    for (let i = 0; i < 12; i++) clients.push(await env.client(project, 'read'));
    let turn = 0;
    const creds = () => clients[turn++ % clients.length]!;

    const now = Date.now();
    await ensurePartitions(env.db, [now - 31 * 86_400_000, now - 15 * 86_400_000, now]);
    const fill = async (projectId: string, n: number) => {
      const t0 = Date.now();
      for (let from = 1; from <= n; from += 250_000) {
        const to = Math.min(n, from + 249_999);
        await env.db.query(
          `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, received_at, properties, groups,
                               origin, path, title, country, city, browser, os, device, referrer_name, utm_source, duration_ms)
           SELECT gen_random_uuid(), $1,
                  (ARRAY['screen_view','screen_view','screen_view','click','purchase','session_start'])[1 + g % 6],
                  'd' || (g % 40000), 'u' || (g % 25000), md5($1 || (g / 8)::text)::uuid,
                  now() - (g::float8 * $3::float8) * interval '1 second', now(),
                  jsonb_build_object('plan', (ARRAY['free','pro','team'])[1 + g % 3], 'price', (g % 400)::numeric / 4),
                  CASE WHEN g % 5 = 0 THEN ARRAY['g' || (g % 50)] ELSE '{}' END,
                  'https://shop.example', (ARRAY['/','/pricing','/docs','/blog','/signup'])[1 + g % 5], 'Shop',
                  (ARRAY['DE','US','FR','GB','NL','SE','PL','ES','IT',''])[1 + g % 10], 'City' || (g % 300),
                  (ARRAY['Chrome','Safari','Firefox','Edge'])[1 + g % 4], (ARRAY['macOS','Windows','iOS','Android'])[1 + g % 4],
                  (ARRAY['desktop','mobile'])[1 + g % 2], (ARRAY['','Google','Twitter'])[1 + g % 3], '', 1000 + g % 5000
           FROM generate_series($2::int, $4::int) g`,
          [projectId, from, (30 * 86_400) / n, to],
        );
      }
      return Date.now() - t0;
    };
    const insertMs = await fill(project, N);
    await fill(other, Math.floor(N / 5));
    // As the worker's commit does: the hour of every event is logged; then the service's own
    // refresh fills the hourly event rollups (sql/009_event_rollups.sql) that totalCount and
    // the event-count charts read.
    const r0 = Date.now();
    await env.db.query(
      `INSERT INTO rollup_invalidations (project_id, bucket)
       SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM events GROUP BY 1, 2 ON CONFLICT DO NOTHING`,
    );
    const timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
    while ((await refreshRollups(env.db, timescale, { before: new Date(Date.now() + 86_400_000), limit: 500 })).buckets > 0);
    await env.db.query('VACUUM ANALYZE events');
    console.log(`inserted ${N} + ${Math.floor(N / 5)} events in ${insertMs} ms (+ other project); rollups refreshed in ${Date.now() - r0} ms`);

    const time = async (label: string, url: () => Promise<string> | string, runs = RUNS) => {
      const ms: number[] = [];
      let bytes = 0;
      for (let i = 0; i < runs; i++) {
        const u = await url();
        const t0 = performance.now();
        const res = await get(u, creds());
        ms.push(performance.now() - t0);
        if (res.status !== 200) throw new Error(`${label}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
        bytes = JSON.stringify(res.body).length;
      }
      const line = `${label.padEnd(58)} p50 ${pct(ms, 50).toFixed(1).padStart(8)} ms  p95 ${pct(ms, 95).toFixed(1).padStart(8)} ms  (${runs} runs, ${(bytes / 1024).toFixed(0)} KiB)`;
      console.log(line);
      return line;
    };
    const base = `${server.url}/export/events`;
    const cursorFor = async (limit: number, page: number) => {
      // The cursor of page-1 (reached by page number once), then page `page` by keyset.
      const res = await get(`${base}?limit=${limit}&page=${page - 1}`, creds());
      if (!res.body.meta.cursor) throw new Error('no cursor');
      return res.body.meta.cursor as string;
    };

    const lines: string[] = [];
    lines.push(await time('events limit=50 page=1 (anchor + count + page)', () => `${base}?limit=50`));
    lines.push(await time('events limit=1000 page=1', () => `${base}?limit=1000`));
    lines.push(await time('events limit=50 page=1 includes=all', () => `${base}?limit=50&includes=profile,meta,properties,geo,device,referrer`));
    for (const page of [2, 100, 1000]) {
      const c = await cursorFor(50, page);
      lines.push(await time(`events limit=50 page=${page} with cursor (keyset)`, () => `${base}?limit=50&cursor=${c}`));
    }
    for (const page of [100, 1000]) {
      lines.push(await time(`events limit=50 page=${page} without cursor (OFFSET)`, () => `${base}?limit=50&page=${page}`, Math.min(RUNS, 10)));
    }
    {
      const c = await cursorFor(1000, 1000);
      lines.push(await time('events limit=1000 page=1000 with cursor (keyset)', () => `${base}?limit=1000&cursor=${c}`));
    }
    lines.push(await time('events filtered (country=DE, plan=pro) limit=50', () => `${base}?limit=50&filters=${encodeURIComponent(JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }, { name: 'properties.plan', operator: 'is', value: ['pro'] }]))}`));

    const charts = `${server.url}/export/charts`;
    const series = (s: unknown) => encodeURIComponent(JSON.stringify(s));
    const bd = (b: unknown) => encodeURIComponent(JSON.stringify(b));
    lines.push(await time('charts 30d event, breakdown country', () => `${charts}?range=30d&series=${series([{ name: '*' }])}&breakdowns=${bd([{ name: 'country' }])}`, Math.min(RUNS, 15)));
    lines.push(await time('charts 30d user, breakdown country', () => `${charts}?range=30d&series=${series([{ name: 'screen_view', segment: 'user' }])}&breakdowns=${bd([{ name: 'country' }])}`, Math.min(RUNS, 15)));
    lines.push(await time('charts 30d property_sum, breakdown properties.plan', () => `${charts}?range=30d&series=${series([{ name: 'purchase', segment: 'property_sum', property: 'properties.price' }])}&breakdowns=${bd([{ name: 'properties.plan' }])}`, Math.min(RUNS, 15)));
    lines.push(await time('charts 30d event, breakdown country, previous=true', () => `${charts}?range=30d&previous=true&series=${series([{ name: '*' }])}&breakdowns=${bd([{ name: 'country' }])}`, Math.min(RUNS, 15)));

    // NDJSON: the whole project through the server-side cursor (no HTTP: the server buffers today).
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    let bytes = 0;
    let lineCount = 0;
    const t0 = performance.now();
    for await (const chunk of await streamEvents(server.deps.db, project, parseEventsParams(new URLSearchParams('includes=meta,properties')), { statementTimeoutMs: 60_000 })) {
      bytes += chunk.length;
      lineCount += chunk.split('\n').length - 1;
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    const ndjson = `ndjson stream of ${lineCount} events: ${((performance.now() - t0) / 1000).toFixed(1)} s, ${(bytes / 1048576).toFixed(0)} MiB, RSS +${((peak - rss0) / 1048576).toFixed(0)} MiB peak`;
    console.log(ndjson);
    lines.push(ndjson);
    console.log(`\n${lines.join('\n')}`);
  } finally {
    await server.close();
    await env.teardown();
  }
});
