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
 * reset under a call. We never cancel calls ourselves.
 */
export function isConnectionLoss(error: unknown): boolean {
  return isErrorType(error, ErrorType.UNAVAILABLE) || isErrorType(error, ErrorType.CANCELLED) || isStreamReset(error);
}

/**
 * A call whose HTTP/2 stream was reset under it: gRPC's INTERNAL with no status from the server, which the client
 * reports as unknown. Only grpc-js's words tell it from an INTERNAL that every retry would meet again (a message it
 * cannot parse or decompress), so this one reads the text.
 */
function isStreamReset(error: unknown): boolean {
  const { code, message } = error as { code?: unknown; message?: unknown };
  return (
    isErrorType(error, ErrorType.UNKNOWN) &&
    code === GRPC_INTERNAL &&
    typeof message === 'string' &&
    message.includes('Received RST_STREAM with code 0')
  );
}
