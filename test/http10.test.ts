// HTTP/1.0: the bundled uWebSockets.js (20.30) parses only HTTP/1.1 request
// lines. An HTTP/1.0 request (nginx's default upstream protocol) never reaches a handler: no
// byte is answered and uWS closes the connection at its idle timeout (about 10 s). No hook in
// the JS API sees the bytes before that, so the service cannot answer it; docs/operating.md
// says to proxy with HTTP/1.1 (nginx: proxy_http_version 1.1). This test pins the behaviour
// (a close, never a hang, and the server unaffected) so a new uWS build that answers shows up.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { Router } from '../internal/http/router';
import { HttpServer } from '../internal/http/server';
import { rawRequest } from './support/fuzz-kit';

let server: HttpServer;
let port: number;

before(async () => {
  const router = new Router().add({ method: 'GET', pattern: '/healthz', family: 'ops', handler: async () => ({ status: 200, body: { status: 'ok' } }) });
  server = new HttpServer({ router, port: 0, host: '127.0.0.1' });
  port = await server.listen();
});

after(() => server.close());

it('an HTTP/1.0 request gets no answer and its connection is closed by the server, not held', { timeout: 60_000 }, async () => {
  const answers = await Promise.all([
    rawRequest(port, 'GET /healthz HTTP/1.0\r\nHost: t\r\n\r\n', { waitMs: 30_000 }),
    rawRequest(port, 'GET /healthz HTTP/1.0\r\n\r\n', { waitMs: 30_000 }),
    rawRequest(port, 'POST /track HTTP/1.0\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}', { waitMs: 30_000 }),
  ]);
  for (const a of answers) {
    assert.equal(a.end, 'closed', 'the server closed the connection (uWS idle timeout)');
    assert.equal(a.data.length, 0, `no bytes: ${a.data.toString('latin1').slice(0, 100)}`);
  }
});

it('HTTP/1.1 is answered meanwhile and after', async () => {
  const a = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n', { waitMs: 5000, untilResponse: true });
  assert.equal(a.status, 200);
});
