import type { EventLogReader } from '#event-log';
import { ApiError, RetryLater } from './api-error.js';

/**
 * One rule for a position the log has not reached, wherever a request names one (`?at`, `from`,
 * `atPosition`, `Last-Event-ID`, and `?minPosition` once its wait is over): 422
 * `position_beyond_head` naming the parameter. State there is not fixed yet, so no answer could be.
 */
export function positionBeyondHead(position: bigint, field: string): ApiError {
  return new ApiError(422, 'position_beyond_head', `${field} ${position} is beyond the log's last event`, field);
}

export async function refuseBeyondHead(eventLog: EventLogReader, position: bigint | undefined, field: string) {
  if (position !== undefined && position > (await eventLog.headPosition())) throw positionBeyondHead(position, field);
}

/** How long a read waits for the read models to reach a position before answering 503. */
const READ_MODEL_WAIT_MS = 5_000;

/**
 * Waits (bounded) until a projection reflects `target`: a read's `?minPosition` or its credential's
 * own latest write. Past the wait, a `minPosition` beyond the log's head is 422, anything else 503.
 */
export async function reachReadModels(
  projection: { waitForPosition(position: bigint, timeoutMs: number): Promise<boolean> },
  eventLog: EventLogReader,
  target: bigint | undefined,
  minPosition: bigint | undefined,
): Promise<void> {
  if (target === undefined || (await projection.waitForPosition(target, READ_MODEL_WAIT_MS))) return;
  await refuseBeyondHead(eventLog, minPosition, 'minPosition');
  throw new RetryLater(
    'projection_behind',
    `the read models have not reached position ${target} within ${READ_MODEL_WAIT_MS} ms; retry later`,
    target === minPosition ? 'minPosition' : undefined,
  );
}
