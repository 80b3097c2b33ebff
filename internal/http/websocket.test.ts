// The WebSocket glue on a real uWS server (no other service): a peer that does not read is
// dropped once its unsent bytes pass the route's limit, instead of being buffered without
// bound; close reasons fit the protocol's 123 bytes; a plain GET on a socket path still
// reaches the HTTP routes; shutting down closes open sockets with 1001; a message over the
// route's limit closes with 1009 and a close frame (up to maxFrameBytes; past it uWS drops the
// connection).
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

test('a message over maxMessageBytes closes with 1009 and a close frame, up to maxFrameBytes; past it uWS drops the connection', async () => {
  const got: string[] = [];
  const closedCodes: number[] = [];
  const router = new Router();
  const http = new HttpServer({
    router, port: 0, host: '127.0.0.1',
    sockets: [{
      pattern: '/s', maxMessageBytes: 4096, maxFrameBytes: 64 * 1024,
      accept: () => ({ message: (d) => void got.push(String(d)), closed: (code) => void closedCodes.push(code) }),
    }],
  });
  const port = await http.listen();
  const session = async (send: (c: WebSocket) => void) => {
    const client = new WebSocket(`ws://127.0.0.1:${port}/s`);
    await new Promise((r) => client.once('open', r));
    const closed = new Promise<{ code: number; reason: string }>((r) => client.once('close', (code, reason) => r({ code, reason: String(reason) })));
    client.on('error', () => {});
    send(client);
    return closed;
  };
  try {
    // At the limit: delivered, the socket stays open.
    const atLimit = await session((c) => {
      c.send('a'.repeat(4096));
      setTimeout(() => c.close(1000), 100);
    });
    assert.equal(atLimit.code, 1000);
    assert.deepEqual(got, ['a'.repeat(4096)]);
    for (const [what, send] of [
      ['text, one byte over', (c: WebSocket) => c.send('b'.repeat(4097))],
      ['binary, 64 KiB', (c: WebSocket) => c.send(Buffer.alloc(64 * 1024))],
      ['in fragments', (c: WebSocket) => { c.send('c'.repeat(3000), { fin: false }); c.send('c'.repeat(3000), { fin: true }); }],
    ] as const) {
      const closed = await session(send);
      assert.equal(closed.code, 1009, `${what}: ${JSON.stringify(closed)}`);
      assert.equal(closed.reason, 'message too big: at most 4096 bytes', what);
    }
    assert.equal(got.length, 1, 'nothing over the limit reached the route');
    // Past maxFrameBytes uWS refuses the frame's header and drops the connection (no close frame).
    const dropped = await session((c) => c.send(Buffer.alloc(64 * 1024 + 1)));
    assert.equal(dropped.code, 1006);
    assert.deepEqual(closedCodes, [1000, 1009, 1009, 1009, 1006]);
    assert.equal(http.openSocketCount, 0);
  } finally {
    http.close();
  }
});

test("a port in use is this server's alone: a second server on it fails to listen, unless both share it (API threads)", async () => {
  const router = new Router().add({ method: 'GET', pattern: '/x', family: 'read', handler: async () => ({ status: 200, body: {} }) });
  const first = new HttpServer({ router, port: 0, host: '127.0.0.1' });
  const port = await first.listen();
  try {
    await assert.rejects(new HttpServer({ router, port, host: '127.0.0.1' }).listen(), /cannot listen on port/);
    await assert.rejects(new HttpServer({ router, port, host: '127.0.0.1', sharedPort: true }).listen(), /cannot listen on port/);
  } finally {
    await first.drain(1000);
  }
  // Threads that share a fixed port (API_THREADS needs one) all ask to share it.
  const servers = [new HttpServer({ router, port, host: '127.0.0.1', sharedPort: true }), new HttpServer({ router, port, host: '127.0.0.1', sharedPort: true })];
  try {
    for (const s of servers) assert.equal(await s.listen(), port);
  } finally {
    await Promise.all(servers.map((s) => s.drain(1000)));
  }
});
