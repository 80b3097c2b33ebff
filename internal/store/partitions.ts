// Monthly range partitions of `events` on plain PostgreSQL (TimescaleDB makes chunks
// itself): made ahead by a periodic job and the worker's start, and by the worker's write
// path for a backfill into a month without one (docs/operating.md "Event time and
// partitions").
import type { EventRecord } from '../model/event';
import { transaction, type Pool } from './db';

const MONTH_MS = (d: Date) => Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);

/**
 * How long a partition's creation waits for its lock on `events` (then it gives up and is
 * tried again), so that it never queues the statements on `events` behind it for long.
 * Creating one as a table attached to `events` takes a lock on `events` that no read or write
 * of it conflicts with (only DDL: another attach, a partition's drop).
 */
export const PARTITION_LOCK_TIMEOUT_MS = 1000;

/** A partition could not be created: its lock on `events` was not granted in time (the batch is retried). */
export class PartitionBusyError extends Error {}

/** Monthly range partitions of `events` on plain PostgreSQL (TimescaleDB makes chunks itself). */
export class PartitionKeeper {
  private known = new Set<number>();
  private readonly lockTimeoutMs: number;
  private readonly attempts: number;
  constructor(private readonly db: Pool, private readonly timescale: boolean, opts: { lockTimeoutMs?: number; attempts?: number } = {}) {
    this.lockTimeoutMs = opts.lockTimeoutMs ?? PARTITION_LOCK_TIMEOUT_MS;
    this.attempts = Math.max(1, opts.attempts ?? 5);
  }

  /** After an error (e.g. retention dropped a partition) every month is checked again. */
  forget(): void {
    this.known.clear();
  }

  async ensureFor(events: EventRecord[]): Promise<void> {
    if (this.timescale) return;
    const months = new Set<number>();
    for (const e of events) months.add(MONTH_MS(e.createdAt));
    for (const m of months) if (!this.known.has(m)) await this.create(m);
  }

  /**
   * This month and the next `ahead` (a periodic job and the worker's start), so that the
   * live path has a partition to write to when a month begins; only a backfill into a month
   * without one creates it on the write path. Returns the months it had to check.
   */
  async ensureAhead(ahead = 2, nowMs = Date.now()): Promise<number> {
    if (this.timescale) return 0;
    const now = new Date(nowMs);
    let checked = 0;
    for (let i = 0; i <= ahead; i++) {
      const m = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + i, 1);
      if (this.known.has(m)) continue;
      await this.create(m);
      checked++;
    }
    return checked;
  }

  /**
   * The month's partition, made as a table like `events` (its columns, defaults, constraints
   * and indexes) and attached to `events` in one transaction. Not CREATE TABLE ... PARTITION
   * OF: that takes an ACCESS EXCLUSIVE lock on `events`, so it waits for every statement on
   * `events` (a refresh transaction, an export a slow client reads) and every later one,
   * whatever its project, queues behind it; a backfill into 120 new months then waited 120
   * times. ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE, which reads and writes do not
   * conflict with. The lock is still waited for at most lockTimeoutMs, `attempts` times;
   * PartitionBusyError when it was never granted. An existing partition needs no lock (its
   * name is taken: 42P07 at once).
   */
  private async create(m: number): Promise<void> {
    const from = new Date(m);
    const to = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth() + 1, 1));
    const name = `events_p${from.toISOString().slice(0, 7).replace('-', '')}`;
    for (let attempt = 1; ; attempt++) {
      try {
        await transaction(this.db, async (c) => {
          await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(this.lockTimeoutMs))}`);
          await c.query(`CREATE TABLE ${name} (LIKE events INCLUDING ALL)`);
          await c.query(`ALTER TABLE events ATTACH PARTITION ${name} FOR VALUES FROM ('${from.toISOString()}') TO ('${to.toISOString()}')`);
        });
        break;
      } catch (err) {
        const code = (err as { code?: string }).code ?? '';
        // The month's partition exists (another worker made it), or a partition of another
        // name covers the month (42P17: it would overlap; the new table is rolled back).
        if (['42P07', '23505', '42P17'].includes(code)) break;
        if (code !== '55P03') throw err;
        if (attempt >= this.attempts) {
          throw Object.assign(new PartitionBusyError(`partition ${name} not created: its lock on events was not granted within ${this.lockTimeoutMs} ms, ${attempt} times`), { cause: err });
        }
        // Queued again soon: it is granted as soon as the DDL it waits for ends.
        await new Promise((r) => setTimeout(r, 10 + Math.random() * 40));
      }
    }
    this.known.add(m);
  }
}
