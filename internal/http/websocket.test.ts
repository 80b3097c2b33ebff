// The WebSocket glue on a real uWS server (no other service): a peer that does not read is
// dropped once its unsent bytes pass the route's limit, instead of being buffered without
// bound; close reasons fit the protocol's 123 bytes; a plain GET on a socket path still
// reaches the HTTP routes; shutting down closes open sockets with 1001.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { HttpServer } from './server';
import { Router } from './router';
import { closeReason } from './websocket';
import type { SocketConnection } from './types';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('close reasons are cut to 123 bytes on a character boundary', () => {
  assert.equal(closeReason('short'), 'short');
  const long = 'ü'.repeat(100); // 200 bytes
  const cut = closeReason(long);
  assert.ok(Buffer.byteLength(cut) <= 123 && cut === 'ü'.repeat(61));
});

test('a peer that does not read is closed once 64 KiB wait for it; the server keeps no socket', async () => {
  let server: SocketConnection | null = null;
  let closedCode: number | null = null;
  const router = new Router().add({ method: 'GET', pattern: '/things/:id', family: 'read', handler: async (req) => ({ status: 200, body: { id: req.params.id } }) });
  const http = new HttpServer({
    router, port: 0, host: '127.0.0.1',
    sockets: [{
      pattern: '/things/:id',
      maxBufferedBytes: 64 * 1024,
      accept: (req, socket) => {
        server = socket;
        socket.send(JSON.stringify({ hello: req.params.id }));
        return { message: () => {}, closed: (code) => (closedCode = code) };
      },
    }],
  });
  const port = await http.listen();
  try {
    assert.deepEqual(await (await fetch(`http://127.0.0.1:${port}/things/a%20b`)).json(), { id: 'a b' }, 'a plain GET is the HTTP route');
    const client = new WebSocket(`ws://127.0.0.1:${port}/things/x`);
    const first = await new Promise<string>((resolve) => client.once('message', (d) => resolve(String(d))));
    assert.equal(first, '{"hello":"x"}');
    // Stop reading: the kernel buffers fill, then uWS's, then the route's limit is reached.
    (client as unknown as { _socket: { pause(): void } })._socket.pause();
    const chunk = 'x'.repeat(16 * 1024);
    let sent = 0;
    for (let i = 0; i < 8192 && server!.send(chunk); i++) {
      sent += chunk.length;
      if (i % 64 === 63) await sleep(5); // let the event loop flush to the kernel
    }
    assert.equal(server!.isClosed, true, `still open after ${sent} bytes`);
    assert.ok(sent < 64 * 1024 * 1024, `closed after ${sent} bytes`);
    assert.equal(closedCode, 1008);
    assert.equal(http.openSocketCount, 0);
    client.terminate();
  } finally {
    http.close();
  }
});

test('closing the server closes open sockets with 1001', async () => {
  const router = new Router();
  const http = new HttpServer({
    router, port: 0, host: '127.0.0.1',
    sockets: [{ pattern: '/s', accept: () => ({ message: () => {}, closed: () => {} }) }],
  });
  const port = await http.listen();
  const client = new WebSocket(`ws://127.0.0.1:${port}/s`);
  await new Promise((r) => client.once('open', r));
  const closed = new Promise<number>((r) => client.once('close', (code) => r(code)));
  http.close();
  assert.equal(await closed, 1001);
});
