import esdb from '@eventstore/db-client';
import { matchesFilter } from '../append-plan.js';
import type { EventFilter, RecordedEvent, SubscribeOptions, Subscription, SubscriptionBatch } from '../event-log.js';
import { isServerFailure, isSystem, toRecordedEvent, type ResolvedRecord } from './eventstoredb-records.js';

const { START, eventTypeFilter, streamNameFilter, excludeSystemEvents } = esdb;
type Client = InstanceType<typeof esdb.EventStoreDBClient>;

type Inbox =
  { kind: 'event'; record: ResolvedRecord } | { kind: 'checkpoint'; position: bigint } | { kind: 'caught_up' };

interface Dependencies {
  readonly retryDelayMs: number;
  /**
   * While nothing arrives for this long, `probe` asks the server something: a server that answers nothing (frozen,
   * or a partition that keeps the connection) fails it, and the subscription is made again rather than wait unlogged.
   */
  readonly idleProbeMs: number;
  readonly probe: () => Promise<unknown>;
  readonly onError?: (error: Error) => void;
}

/** The inbox pauses the gRPC stream above this many items, so a slow consumer is not flooded. */
const HIGH_WATER = 10_000;

/**
 * `$all` subscription as batches. Filters run on the server (event type or stream prefixes; with
 * none, system events are excluded) with checkpoints, and again here for what the server cannot
 * combine. When the connection drops, it subscribes again from the last checkpoint it yielded:
 * nothing is missed, and events at or before that checkpoint are never yielded twice.
 */
export class EventStoreSubscription implements Subscription {
  private closed = false;
  private wake: (() => void) | undefined;
  private current: esdb.AllStreamSubscription | undefined;

  constructor(
    private readonly client: Client,
    private readonly options: SubscribeOptions,
    private readonly deps: Dependencies,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionBatch> {
    let checkpoint = this.options.fromPosition ?? 0n;
    while (!this.closed) {
      const inbox: Inbox[] = [];
      let failure: Error | undefined;
      let ended = false;
      const notify = () => this.wake?.();
      const subscription = this.client.subscribeToAll({
        fromPosition: checkpoint === 0n ? START : { commit: checkpoint, prepare: checkpoint },
        filter: serverFilter(this.options.filter, (_subscription, position) => {
          inbox.push({ kind: 'checkpoint', position: position.commit });
          notify();
        }),
      });
      this.current = subscription;
      subscription.on('data', (resolved: esdb.ResolvedEvent) => {
        if (resolved.event) inbox.push({ kind: 'event', record: resolved.event });
        if (inbox.length > HIGH_WATER) subscription.pause();
        notify();
      });
      subscription.on('caughtUp', () => {
        inbox.push({ kind: 'caught_up' });
        notify();
      });
      subscription.on('error', (error: Error) => {
        failure = error;
        notify();
      });
      subscription.on('end', () => {
        ended = true;
        notify();
      });
      try {
        while (!this.closed) {
          if (inbox.length === 0 && !failure && !ended && !(await this.woken(this.deps.idleProbeMs))) {
            const unanswered = await this.deps.probe().then(
              () => undefined,
              (error: Error) => error,
            );
            // The subscription's own failure, met while the probe was out, is the one told.
            failure ??= unanswered;
          }
          this.wake = undefined;
          const batch = this.toBatch(inbox.splice(0), checkpoint);
          if (subscription.isPaused()) subscription.resume();
          if (batch.events.length > 0 || batch.checkpoint !== checkpoint || batch.caughtUp) {
            checkpoint = batch.checkpoint;
            yield batch;
          }
          if (failure || ended) break;
        }
      } finally {
        await subscription.unsubscribe().catch(() => undefined);
      }
      if (this.closed) return;
      if (failure && !isServerFailure(failure)) throw failure;
      this.deps.onError?.(failure ?? new Error('subscription ended by the server'));
      await new Promise((resolve) => setTimeout(resolve, this.deps.retryDelayMs));
    }
  }

  /** True once woken (an item, a failure, the end, closing), false when `ms` passed first. */
  private woken(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.current?.unsubscribe().catch(() => undefined);
  }

  private toBatch(items: readonly Inbox[], after: bigint): SubscriptionBatch {
    const events: RecordedEvent[] = [];
    let checkpoint = after;
    let caughtUp = false;
    for (const item of items) {
      if (item.kind === 'caught_up') {
        caughtUp = true;
        continue;
      }
      const position = item.kind === 'event' ? item.record.position!.commit : item.position;
      if (position <= checkpoint) continue;
      checkpoint = position;
      if (item.kind === 'event' && !isSystem(item.record) && matchesFilter(item.record, this.options.filter)) {
        events.push(toRecordedEvent(item.record));
      }
    }
    return { events, checkpoint, caughtUp };
  }
}

function serverFilter(
  filter: EventFilter | undefined,
  checkpointReached: (subscription: esdb.AllStreamSubscription, position: esdb.Position) => void,
) {
  const common = { checkpointInterval: 1, checkpointReached };
  if (filter?.eventTypePrefixes) return eventTypeFilter({ prefixes: [...filter.eventTypePrefixes], ...common });
  if (filter?.streamPrefixes) return streamNameFilter({ prefixes: [...filter.streamPrefixes], ...common });
  return excludeSystemEvents(common);
}
