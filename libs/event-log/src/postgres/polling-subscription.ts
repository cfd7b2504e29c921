import type { EventFilter, ReadAllResult, Subscription, SubscriptionBatch } from '../event-log.js';
import type { PostgresNotifier } from './postgres-notifier.js';
import type { RecentCommits } from './recent-commits.js';

/** How long a subscription told of a head past it waits for its own instance's commit under way before it reads. */
const SETTLE_WAIT_MS = 20;

/**
 * Catch-up then live, by reading the log page after page from the last checkpoint and, once
 * caught up, sleeping until a notification (or the poll interval) says it grew. Because
 * positions follow commit order, "everything after my checkpoint" never misses a late commit.
 * What this instance committed itself right after the checkpoint is taken from `RecentCommits`
 * without a read, and a notification of a head the subscription has already reached reads nothing.
 *
 * Ordered, gap-free, exactly once per iteration. A read failure ends the iteration with that
 * error so the consumer can restart from its own stored checkpoint.
 */
export class PollingSubscription implements Subscription {
  private readonly abort = new AbortController();

  constructor(
    private readonly read: (after: bigint) => Promise<ReadAllResult>,
    private readonly recent: RecentCommits,
    private readonly notifier: PostgresNotifier,
    private readonly options: {
      readonly fromPosition: bigint;
      readonly filter: EventFilter | undefined;
      readonly pageSize: number;
      readonly pollIntervalMs: number;
    },
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionBatch> {
    const { signal } = this.abort;
    const { filter, pageSize, pollIntervalMs } = this.options;
    let checkpoint = this.options.fromPosition;
    let announcedCaughtUp = false;
    let mustRead = true;
    let generation = this.notifier.readGeneration;
    this.recent.follow(1);
    try {
      while (!signal.aborted) {
        const seen = this.notifier.currentVersion;
        if (this.notifier.readGeneration !== generation) {
          generation = this.notifier.readGeneration;
          mustRead = true;
        }
        const announcedPast = () => this.notifier.announcedHead > checkpoint;
        let batch: ReadAllResult | undefined = this.recent.after(checkpoint, filter, pageSize);
        if (!batch && !mustRead && announcedPast()) {
          // The head announced may be this instance's own commit, whose answer is still on its way
          // (briefly: a commit stuck on a lock must not hold up what other instances committed).
          await this.recent.settled(SETTLE_WAIT_MS, signal);
          batch = this.recent.after(checkpoint, filter, pageSize);
        }
        let read = false;
        if (!batch && (mustRead || announcedPast())) {
          batch = await this.read(checkpoint);
          read = true;
        }
        if (signal.aborted) return;
        if (batch) {
          // Only a read that reached the head settles a forced read (a reconnect, the poll timer).
          mustRead = read ? !batch.caughtUp : mustRead || !batch.caughtUp;
          if (batch.events.length > 0 || batch.checkpoint !== checkpoint || (batch.caughtUp && !announcedCaughtUp))
            yield batch;
          announcedCaughtUp ||= batch.caughtUp;
          checkpoint = batch.checkpoint;
          // More to take, or a head announced while we were busy: look again before sleeping.
          if (!batch.caughtUp || mustRead || announcedPast()) continue;
        }
        // Woken by the poll timer rather than a notification: one may have been lost, so read.
        mustRead = !(await this.notifier.waitForChange(seen, pollIntervalMs, signal));
      }
    } finally {
      this.recent.follow(-1);
    }
  }

  async close(): Promise<void> {
    this.abort.abort();
  }
}
