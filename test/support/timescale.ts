// Starts TimescaleDB-on-PGlite (test/support/timescale-server.ts) in a child process and
// returns a postgres:// URL for `pg`. The engine serves ONE connection at a time (further
// connections wait in a queue until the first closes), so use `new pg.Pool({ max: 1 })`
// or a single Client, and end it before stop().
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface TimescaleOptions {
  /** Persist to this directory (created if missing, reopened if it holds a cluster). Default: in memory. */
  dataDir?: string;
  /** Port on 127.0.0.1; default 0 = a free port chosen by the OS. */
  port?: number;
  /** Run `CREATE EXTENSION IF NOT EXISTS timescaledb` before serving (default true). */
  createExtension?: boolean;
  /** Give up if the engine is not serving after this many ms (default 120000). */
  startTimeoutMs?: number;
}

export interface Timescale {
  url: string;
  port: number;
  /** Engine start-up as measured by the server: WASM + cluster open, and until ready to serve. */
  timings: { createMs: number; readyMs: number; spawnToReadyMs: number };
  /** Closes the database cleanly (flushes a data dir) and waits for the process to exit;
   *  rejects with the engine's stderr if it had crashed. */
  stop(): Promise<void>;
  /** SIGKILLs the engine (simulates a crash; a data dir may be left unflushed). */
  kill(): Promise<void>;
}

const SERVER = fileURLToPath(new URL('./timescale-server.ts', import.meta.url));
const TSX = import.meta.resolve('tsx');

export async function startTimescale(opts: TimescaleOptions = {}): Promise<Timescale> {
  const args = ['--import', TSX, SERVER, '--port', String(opts.port ?? 0)];
  if (opts.dataDir) args.push('--data-dir', opts.dataDir);
  if (opts.createExtension === false) args.push('--no-extension');

  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-8192);
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;

  const ready = await new Promise<{ port: number; createMs: number; readyMs: number }>(
    (resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`timescale: not ready after ${opts.startTimeoutMs ?? 120_000} ms\n${stderr}`));
      }, opts.startTimeoutMs ?? 120_000);
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        // PGlite itself may print to stdout; the ready line is the JSON one.
        if (!line.startsWith('{"port":')) return;
        clearTimeout(timer);
        lines.close();
        resolve(JSON.parse(line));
      });
      void exited.then(([code, signal]) => {
        clearTimeout(timer);
        reject(new Error(`timescale: engine exited (${code ?? signal}) before ready\n${stderr}`));
      });
    },
  );
  // Keep draining stdout so the child never blocks on a full pipe.
  child.stdout!.resume();

  const spawnToReadyMs = Math.round(performance.now() - t0);
  let done: Promise<void> | undefined;
  const end = (signal: NodeJS.Signals) => {
    done ??= (async () => {
      try {
        if (child.exitCode !== null && child.exitCode !== 0) {
          // Died on its own (e.g. a WASM trap): surface why.
          throw new Error(`timescale: engine had exited with ${child.exitCode}\n${stderr}`);
        }
        if (child.exitCode === null && child.signalCode === null) {
          if (signal === 'SIGTERM') child.stdin!.end(); // the server also exits on stdin EOF
          child.kill(signal);
          const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
          const [code, sig] = await exited;
          clearTimeout(force);
          if (signal === 'SIGTERM' && code !== 0) {
            throw new Error(`timescale: engine exited with ${code ?? sig} on stop\n${stderr}`);
          }
        }
      } finally {
        child.stdin!.destroy();
        child.stdout!.destroy();
        child.stderr!.destroy();
      }
    })();
    return done;
  };
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${ready.port}/postgres?sslmode=disable`,
    port: ready.port,
    timings: { createMs: ready.createMs, readyMs: ready.readyMs, spawnToReadyMs },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  };
}

