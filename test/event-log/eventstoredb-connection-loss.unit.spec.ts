import esdb from '@eventstore/db-client';
import { Metadata, status } from '@grpc/grpc-js';
import { isConnectionLoss } from '../../libs/event-log/src/eventstoredb/eventstoredb-records.js';

/** A gRPC failure as grpc-js reports it, turned into the client's error as the client turns it. */
function failure(code: status, details: string) {
  const raw = Object.assign(new Error(`${code} ${status[code]}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
  return esdb.convertToCommandError(raw);
}

describe('which EventStoreDB client errors are a connection loss, retried with the same event ids', () => {
  it('the server unreachable, a call it cut, and a stream reset under a call', () => {
    expect(isConnectionLoss(failure(status.UNAVAILABLE, 'No connection established'))).toBe(true);
    expect(isConnectionLoss(failure(status.CANCELLED, 'Call cancelled'))).toBe(true);
    expect(
      isConnectionLoss(failure(status.INTERNAL, 'Received RST_STREAM with code 0 (Call ended without gRPC status)')),
    ).toBe(true);
  });

  it('grpc-js’s own error, which the server-features call of a reconnection passes through unconverted', () => {
    const raw = (code: status) =>
      Object.assign(new Error(`${code} ${status[code]}: No connection established`), {
        code,
        details: 'No connection established',
        metadata: new Metadata(),
      });
    expect(isConnectionLoss(raw(status.UNAVAILABLE))).toBe(true);
    expect(isConnectionLoss(raw(status.CANCELLED))).toBe(true);
    expect(isConnectionLoss(raw(status.PERMISSION_DENIED))).toBe(false);
    // A numeric code alone (a system error's errno) is not gRPC's.
    expect(isConnectionLoss(Object.assign(new Error('x'), { code: 14 }))).toBe(false);
  });

  it('not an INTERNAL every retry would meet again, nor a refusal', () => {
    for (const details of [
      'Response message parsing error: index out of range',
      'Request message serialization failure: bad',
      'Failed to decompress deflate-encoded message',
      'Received RST_STREAM with code 2 triggered by internal client error: Protocol error',
    ])
      expect({ details, loss: isConnectionLoss(failure(status.INTERNAL, details)) }).toEqual({ details, loss: false });
    expect(isConnectionLoss(failure(status.DEADLINE_EXCEEDED, 'Deadline exceeded'))).toBe(false);
    expect(isConnectionLoss(failure(status.UNAUTHENTICATED, 'Access denied'))).toBe(false);
  });
});
