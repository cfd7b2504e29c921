import type { ExpectedRevision, StreamState } from './event-log.js';

/** The one conflict error every adapter raises when a stream is not where the caller expected it. */
export class WrongExpectedRevisionError extends Error {
  override readonly name = 'WrongExpectedRevisionError';
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: StreamState,
  ) {
    super(`stream ${streamId}: expected revision ${String(expected)}, actual ${String(actual)}`);
  }
}

/** An event the log cannot store as given (bad id, empty type, data that is not JSON). */
export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** The log is closed or shutting down; nothing was written. */
export class EventLogClosedError extends Error {
  override readonly name = 'EventLogClosedError';
  constructor() {
    super('the event log is closed');
  }
}

/** The EventStoreDB client cannot use its connection string: the message says why and quotes nothing of the string. */
export class ConnectionStringError extends Error {
  override readonly name = 'ConnectionStringError';
}
