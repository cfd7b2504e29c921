import type { EventLogReader } from '#event-log';
import { ApiError } from './api-error.js';

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
