import esdb from '@eventstore/db-client';
import type { EventMetadata, RecordedEvent } from '../event-log.js';
import { EventLogClosedError } from '../errors.js';
import { told } from '../postgres/database-failure.js';

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
  const told = asCommandError(error);
  return isErrorType(told, ErrorType.UNAVAILABLE) || isErrorType(told, ErrorType.CANCELLED) || isStreamReset(told);
}

/**
 * The client's error for a gRPC failure. Most calls convert theirs; the server-features call a (re)connection makes
 * before anything else passes grpc-js's own through (a numeric code, details and metadata, no type).
 */
function asCommandError(error: unknown): unknown {
  const { code, type, metadata } = (error ?? {}) as { code?: unknown; type?: unknown; metadata?: unknown };
  const raw = typeof code === 'number' && type === undefined && metadata !== undefined;
  return raw ? esdb.convertToCommandError(error as Parameters<typeof esdb.convertToCommandError>[0]) : error;
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

/** The server failed the call, not its content: a connection lost beyond the adapter's retries, or its deadline passed. */
export function isServerFailure(error: unknown): boolean {
  return isConnectionLoss(error) || isErrorType(asCommandError(error), ErrorType.DEADLINE_EXCEEDED);
}

/**
 * `error`, marked as the server's failure when it is one (`databaseFailure`), so the API answers 503 rather than a
 * 500. Either kind may have stored a write, so both are `lost`; for a read, which wrote nothing, the API says
 * "unavailable".
 */
export function toldServerFailure(error: unknown, { closing }: { closing: boolean }): unknown {
  // Closing cancels the client's calls under way: whether their writes landed is as unknown.
  const lost = isServerFailure(error) || (closing && !(error instanceof EventLogClosedError));
  return lost ? told(error as Error, 'lost') : error;
}
