// A project row changed (`cli project update`): every API process must drop its cached copy
// at once, as it sees a revocation at once. The CLI writes the change to PostgreSQL, then
// announces the project id on the namespace's Redis channel (internal/redis/announce.ts);
// each API process (each thread) listens, forgets the row and acknowledges, and the CLI
// returns once every listener has. After a lost connection anything may have changed: every
// cached project row is dropped. The row cache's TTL (5 s) bounds a change missed otherwise.
import type { Redis, RedisKeys } from '../redis/redis';
import { acknowledge } from '../redis/announce';

export interface ProjectChangeWatch {
  close(): void;
}

/**
 * Listens on `subscriber` (a connection of its own: a subscribed Redis connection can do
 * nothing else) and calls `onChange(projectId)`, then acknowledges on `publisher`, or
 * `onChange(null)` when the connection came back after a loss (any project may have changed
 * meanwhile).
 */
export function watchProjectChanges(subscriber: Redis, publisher: Redis, keys: RedisKeys, onChange: (projectId: string | null) => void): ProjectChangeWatch {
  let readyBefore = false;
  subscriber.on('ready', () => {
    if (readyBefore) onChange(null);
    readyBefore = true;
  });
  subscriber.on('message', (channel: string, message: string) => {
    if (channel !== keys.projectChanges) return;
    onChange(message);
    acknowledge(publisher, keys.projectChanges, message);
  });
  subscriber.subscribe(keys.projectChanges).catch(() => {}); // queued until connected; resubscribed on reconnect
  if (subscriber.status === 'wait') subscriber.connect().catch(() => {});
  return { close: () => subscriber.disconnect() };
}
