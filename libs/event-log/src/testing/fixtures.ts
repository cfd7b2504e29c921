import { randomUUID } from 'node:crypto';
import type { NewEvent, RecordedEvent, Subscription } from '../event-log.js';

export function newEvents(
  count: number,
  type = 'test.happened',
  data: (index: number) => unknown = (index) => ({ index }),
): NewEvent[] {
  return Array.from({ length: count }, (_, index) => ({ id: randomUUID(), type, data: data(index) }));
}

/** A prefix no other test uses, so suites sharing a log never read each other's streams. */
export function uniquePrefix(label: string): string {
  return `${label}${randomUUID().slice(0, 8)}-`;
}

export interface Collected {
  readonly events: RecordedEvent[];
  readonly checkpoint: bigint;
}

/**
 * Reads a subscription until `done` holds, then closes it. Bounded: fails after `timeoutMs`
 * with what was collected, never a fixed sleep; or as soon as the subscription ends first.
 */
export async function collectUntil(
  subscription: Subscription,
  done: (collected: Collected) => boolean,
  timeoutMs = 30_000,
): Promise<Collected> {
  const events: RecordedEvent[] = [];
  let checkpoint = -1n;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void subscription.close();
  }, timeoutMs);
  try {
    for await (const batch of subscription) {
      events.push(...batch.events);
      checkpoint = batch.checkpoint;
      if (done({ events, checkpoint })) break;
    }
  } finally {
    clearTimeout(timer);
    await subscription.close();
  }
  if (!done({ events, checkpoint }))
    throw new Error(
      timedOut
        ? `subscription gave up after ${timeoutMs} ms with ${events.length} events`
        : `subscription ended (its log closed) with ${events.length} events`,
    );
  return { events, checkpoint };
}

export function positions(events: readonly RecordedEvent[]): bigint[] {
  return events.map((event) => event.position);
}

export function isStrictlyIncreasing(values: readonly bigint[]): boolean {
  return values.every((value, index) => index === 0 || value > values[index - 1]);
}
