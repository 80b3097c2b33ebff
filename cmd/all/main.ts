import { loadConfig } from '../../internal/config/config';
import { main } from '../../internal/app/runtime';

// The worker role runs in a worker thread of its own: its batches never hold up a 202.
await main(loadConfig(), { api: true, worker: true, workerInThread: true });
