// Announcements from the CLI to every running API thread (a revoked client, a changed
// project): the CLI publishes on a channel and waits until each thread that got the message
// says it has acted on it, on the channel's acks channel, so that the next request to any API
// process sees the change. A thread that never answers (stalled, or its connection lost) is
// waited for at most `waitMs`; the listeners' own fallbacks (the gate's background check, the
// project cache's TTL) then bound how long it can miss the change.
import type { Redis } from './redis';

/** The channel on which the listeners of `channel` acknowledge its messages. */
export const acksOf = (channel: string): string => `${channel}:acks`;

/**
 * Publishes `message` on `channel`; resolves once as many acknowledgements of it have come as
 * subscribers received it, or after `waitMs`.
 */
export async function announce(redis: Redis, channel: string, message: string, waitMs: number): Promise<{ receivers: number; acked: number }> {
  const acks = redis.duplicate();
  try {
    let acked = 0;
    let receivers = Infinity;
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    acks.on('message', (_channel: string, m: string) => {
      if (m === message && ++acked >= receivers) done();
    });
    await acks.subscribe(acksOf(channel));
    receivers = await redis.publish(channel, message);
    if (acked >= receivers) done();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    return { receivers, acked };
  } finally {
    acks.disconnect();
  }
}

/** A listener has acted on `message` of `channel` (on `publisher`: not a subscribed connection). */
export function acknowledge(publisher: Redis, channel: string, message: string): void {
  publisher.publish(acksOf(channel), message).catch(() => {});
}
