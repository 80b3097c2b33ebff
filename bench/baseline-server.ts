// The ingest benchmark's baseline servers, each in a process of its own (bench/ingest.ts
// spawns them, so that their CPU is read from /proc/<pid> like Tidemark's):
//   bare     uWebSockets.js answering 202 after reading the body (the ceiling);
//   publish  uWS + one awaited JetStream publish of the body per request (the naive durable design).
// --threads N runs N uWS apps on the same port, one per worker thread (SO_REUSEPORT), as
// Tidemark's API_THREADS does.
//
//   npx tsx bench/baseline-server.ts bare --port 12345 [--threads 2]
//   npx tsx bench/baseline-server.ts publish --port 12345 --subject ns.events
// Prints "listening <port>" once every thread listens.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { loadNativeUws } from '../internal/http/uws';

interface Options {
  kind: 'bare' | 'publish';
  port: number;
  subject: string;
  natsUrl: string;
}

const ACCEPTED = '{"deviceId":"00000000000000000000000000000000"}';

async function serve(o: Options): Promise<void> {
  const uws = loadNativeUws();
  const app = uws.App();
  if (o.kind === 'bare') {
    app.post('/*', (res) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      res.onData((_chunk, isLast) => {
        if (!isLast || aborted) return;
        res.cork(() => res.writeStatus('202 Accepted').writeHeader('Content-Type', 'application/json').end(ACCEPTED));
      });
    });
  } else {
    const nc = await connect({ servers: o.natsUrl });
    const js = jetstream(nc, { timeout: 5000 });
    app.post('/*', (res) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      const chunks: Buffer[] = [];
      res.onData((chunk, isLast) => {
        chunks.push(Buffer.from(chunk.slice(0)));
        if (!isLast) return;
        js.publish(o.subject, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).then(
          () => {
            if (!aborted) res.cork(() => res.writeStatus('202 Accepted').writeHeader('Content-Type', 'application/json').end(ACCEPTED));
          },
          () => {
            if (!aborted) res.cork(() => res.writeStatus('503 Service Unavailable').end());
          },
        );
      });
    });
  }
  await new Promise<void>((resolve, reject) => {
    app.listen('127.0.0.1', o.port, (sock) => (sock ? resolve() : reject(new Error(`cannot listen on ${o.port}`))));
  });
}

if (isMainThread) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      port: { type: 'string' },
      threads: { type: 'string', default: '1' },
      subject: { type: 'string', default: 'bench.events' },
      nats: { type: 'string', default: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' },
    },
  });
  const kind = positionals[0];
  if (kind !== 'bare' && kind !== 'publish') throw new Error('usage: baseline-server.ts bare|publish --port N [--threads N]');
  const o: Options = { kind, port: Number(values.port), subject: values.subject!, natsUrl: values.nats! };
  await serve(o);
  const extra = Number(values.threads) - 1;
  await Promise.all(
    Array.from({ length: extra }, () => {
      const w = new Worker(
        `import('tsx/esm/api').then((t) => { t.register(); return import(${JSON.stringify(import.meta.url)}); });`,
        { eval: true, workerData: o },
      );
      return new Promise<void>((resolve, reject) => {
        w.once('message', () => resolve());
        w.once('error', reject);
      });
    }),
  );
  console.log(`listening ${o.port}`);
} else {
  await serve(workerData as Options);
  parentPort!.postMessage('listening');
}
