import esdb from '@eventstore/db-client';
import type { EventMetadata, RecordedEvent } from '../event-log.js';

const { ErrorType } = esdb;
/** gRPC's status code INTERNAL. */
const GRPC_INTERNAL = 13;
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
 * The server went away: unreachable, a long-lived call (BatchAppend, a subscription) cut by it, or the connection
 * reset under a call (gRPC's INTERNAL, "RST_STREAM … without gRPC status", which the client reports as unknown). We
 * never cancel calls ourselves.
 */
export function isConnectionLoss(error: unknown): boolean {
  return (
    isErrorType(error, ErrorType.UNAVAILABLE) ||
    isErrorType(error, ErrorType.CANCELLED) ||
    (isErrorType(error, ErrorType.UNKNOWN) && (error as { code?: unknown }).code === GRPC_INTERNAL)
  );
}
