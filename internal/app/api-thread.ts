// One extra thread (see threads.ts): an API thread (API_THREADS > 1) runs the API role on the
// main thread's port; npm start's worker thread runs the worker role without a server. Both
// answer the main thread's drain and metrics requests.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { start } from './runtime';
import type { FromThread, ThreadData, ToThread } from './threads';

const port = parentPort;
if (!port) throw new Error('api-thread.ts runs only as a worker thread');
const { cfg, index, role = 'api' } = workerData as ThreadData;

// npm start's worker thread yields the CPU to the threads that answer producers when the
// cores are contended (Linux: a thread's own nice value; elsewhere nothing happens).
if (role === 'worker' && cfg.WORKER_THREAD_NICE > 0) {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (tid > 0) setPriority(tid, cfg.WORKER_THREAD_NICE);
  } catch {
    // not Linux, or not permitted: the thread keeps the process's priority
  }
}
const send = (m: FromThread) => port.postMessage(m);

let nextId = 1;
const rendering = new Map<number, (text: string) => void>();

try {
  const running = await start(cfg, role === 'api' ? { api: true, worker: false } : { api: false, worker: true }, {
    threadIndex: index,
    noServer: role === 'worker',
    // /metrics answered by this thread: the main thread sums every thread's registry.
    renderMetrics: () =>
      new Promise<string>((resolve) => {
        const id = nextId++;
        rendering.set(id, resolve);
        send({ t: 'render', id });
      }),
  });
  port.on('message', (m: ToThread) => {
    switch (m.t) {
      case 'drain':
        running.drain().then(
          () => {
            send({ t: 'drained' });
            port.close(); // nothing else keeps the thread alive: it exits
          },
          (err: Error) => {
            running.log.error({ err }, 'thread drain failed');
            process.exit(1);
          },
        );
        break;
      case 'snapshot':
        // The worker thread has no /metrics of its own: its gauges (consumer lag, pool) are sampled here.
        (role === 'worker' ? running.sampleGauges().catch(() => {}) : Promise.resolve())
          .then(() => running.metrics.registry.getMetricsAsJSON())
          .then((data) => send({ t: 'snapshot', id: m.id, data }));
        break;
      case 'rendered':
        rendering.get(m.id)?.(m.text);
        rendering.delete(m.id);
        break;
    }
  });
  if (role === 'worker') {
    // The main thread's /readyz reports whether this thread's shards can be written.
    setInterval(() => send({ t: 'health', problem: running.shardManager?.problem() ?? null }), 1000).unref();
  }
  send({ t: 'ready', port: running.port });
} catch (err) {
  send({ t: 'failed', message: (err as Error).message });
  // start() failed before any uWS socket stayed open; leave with whatever clients it opened.
  setTimeout(() => process.exit(1), 100);
}
