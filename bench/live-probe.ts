// A latency probe in its own process: sequential GETs of one URL over one keep-alive
// connection (node:http, no fetch), each timed from the request to the last byte of the body,
// the read clients taken in turn (each has its own rate limit: 100 requests per 10 s);
// prints {"n", "errors", "p50", "p95", "p99", "max"} in ms as one JSON line. bench/queries.ts
// runs it against /live so that the service's tail is not mixed with the in-process client's
// (its fetch allocations and garbage collections run on the server's event loop).
//
// The warm-up runs for --warmup requests and at least --warmup-ms: on two cores the first
// seconds of a fresh process (this one and a freshly started server) are V8 compiling the hot
// path, with p99 1.5-3 ms against ~0.5 ms afterwards (2026-11-28, bench/RESULTS.md "/live
// tail after a warm-up"); a dashboard polls a server that has long been running.
//
//   npx tsx bench/live-probe.ts --url http://127.0.0.1:PORT/insights/P/live \
//     --client ID:SECRET [--client ID:SECRET ...] --n 4000 --warmup 100 --warmup-ms 3000
import http from 'node:http';
import { parseArgs } from 'node:util';
import { percentile } from './query-support';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    client: { type: 'string', multiple: true, default: [] },
    n: { type: 'string', default: '4000' },
    warmup: { type: 'string', default: '100' },
    'warmup-ms': { type: 'string', default: '3000' },
  },
});
if (!values.url) throw new Error('--url is required');
const url = new URL(values.url);
const clients = (values.client ?? []).map((c) => {
  const i = c.indexOf(':');
  return { 'service-client-id': c.slice(0, i), 'service-client-secret': c.slice(i + 1) };
});
if (!clients.length) throw new Error('--client is required');
let turn = 0;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(): Promise<{ ok: boolean; ms: number }> {
  return new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    const headers = clients[turn++ % clients.length];
    const req = http.get({ host: url.hostname, port: url.port, path: url.pathname + url.search, headers, agent }, (res) => {
      res.on('data', () => {});
      res.on('end', () => resolve({ ok: res.statusCode === 200, ms: Number(process.hrtime.bigint() - t) / 1e6 }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

const warmStart = performance.now();
for (let i = 0; i < Number(values.warmup) || performance.now() - warmStart < Number(values['warmup-ms']); i++) await get();
const times: number[] = [];
let errors = 0;
for (let i = 0; i < Number(values.n); i++) {
  const r = await get();
  if (r.ok) times.push(r.ms);
  else errors++;
}
agent.destroy();
times.sort((a, b) => a - b);
console.log(JSON.stringify({
  n: times.length, errors,
  p50: percentile(times, 50), p95: percentile(times, 95), p99: percentile(times, 99), max: times[times.length - 1] ?? NaN,
}));
