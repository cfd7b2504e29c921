import type { ChainedEvent } from '#core';
import type { RecordedEvent } from '#event-log';

/** An event as the chain checks read it: what its hash covers, where it sits, and the two hashes it holds. */
export function chainedEvent(event: RecordedEvent): ChainedEvent {
  return {
    streamId: event.streamId,
    revision: event.revision,
    id: event.id,
    type: event.type,
    data: event.data,
    position: event.position,
    ...event.metadata,
  };
}
