import esdb from '@eventstore/db-client';
import type { EventMetadata, RecordedEvent } from '../event-log.js';

const { ErrorType } = esdb;
export type ResolvedRecord = NonNullable<esdb.ResolvedEvent['event']>;

/** Our event from an EventStoreDB record: our metadata travels as the record's custom metadata; the position is the `$all` commit position. */
export function toRecordedEvent(record: ResolvedRecord): RecordedEvent {
  return {
    id: record.id,
    type: record.type,
    streamId: record.streamId,
    revision: record.revision,
    position: record.position!.commit,
    data: record.data,
    metadata: record.metadata as unknown as EventMetadata,
  };
}

/** EventStoreDB's own streams and events ($-prefixed) are not ours. */
export function isSystem(record: Pick<ResolvedRecord, 'streamId' | 'type'>): boolean {
  return record.streamId.startsWith('$') || record.type.startsWith('$');
}

/** Client errors are recognised by their type, never by message text. */
export function isErrorType(error: unknown, type: esdb.ErrorType): boolean {
  return (error as { type?: unknown })?.type === type;
}

/**
 * Reads go to the cluster's leader: a follower answers them from what it has replicated, which may not hold this
 * process's last write (after an election, the node the client stayed on is one). Plans, read-backs and reads of the
 * service's own writes need the leader's view. A follower refuses them naming the leader, and the client moves there.
 * Appends need nothing: a follower forwards them to the leader.
 */
export const ON_LEADER = { requiresLeader: true } as const;

/**
 * The call failed in a way the client mends by connecting again, so the same call may be sent again: the server went
 * away (unreachable, or a long-lived call such as BatchAppend or a subscription cut by it; we never cancel calls
 * ourselves), or the node is not the leader and named the one that is.
 */
export function clientReconnects(error: unknown): boolean {
  return (
    isErrorType(error, ErrorType.UNAVAILABLE) ||
    isErrorType(error, ErrorType.CANCELLED) ||
    isErrorType(error, ErrorType.NOT_LEADER)
  );
}
