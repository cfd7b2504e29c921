import type { ReadAllResult, Subscription, SubscriptionBatch } from '../event-log.js';
import type { PostgresNotifier } from './postgres-notifier.js';

/**
 * Catch-up then live, by reading the log page after page from the last checkpoint and, once
 * caught up, sleeping until a notification (or the poll interval) says it grew. Because
 * positions follow commit order, "everything after my checkpoint" never misses a late commit.
 *
 * Ordered, gap-free, exactly once per iteration. A read failure ends the iteration with that
 * error so the consumer can restart from its own stored checkpoint.
 */
export class PollingSubscription implements Subscription {
  private readonly abort = new AbortController();

  constructor(
    private readonly read: (after: bigint) => Promise<ReadAllResult>,
    private readonly notifier: PostgresNotifier,
    private readonly fromPosition: bigint,
    private readonly pollIntervalMs: number,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionBatch> {
    const { signal } = this.abort;
    let checkpoint = this.fromPosition;
    let announcedCaughtUp = false;
    while (!signal.aborted) {
      const seen = this.notifier.currentVersion;
      const batch = await this.read(checkpoint);
      if (signal.aborted) return;
      if (batch.events.length > 0 || batch.checkpoint !== checkpoint || (batch.caughtUp && !announcedCaughtUp))
        yield batch;
      announcedCaughtUp ||= batch.caughtUp;
      checkpoint = batch.checkpoint;
      if (batch.caughtUp) await this.notifier.waitForChange(seen, this.pollIntervalMs, signal);
    }
  }

  async close(): Promise<void> {
    this.abort.abort();
  }
}
