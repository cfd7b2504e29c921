import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { eventLogContract } from '#event-log/testing';
import { DEFAULT_MAX_APPEND_SIZE, startEventStoreDouble } from '../support/eventstoredb-double/eventstoredb-double.js';

// EVENTSTORE_TEST_CONNECTION_STRING runs the same contract against a real EventStoreDB or
// KurrentDB node (e.g. esdb://localhost:2113?tls=false from docker-compose): the way to validate
// a release. Without it, the adapter talks gRPC to the wire-protocol double on 127.0.0.1.
eventLogContract(
  'EventStoreDB adapter',
  async () => {
    const real = process.env.EVENTSTORE_TEST_CONNECTION_STRING;
    const double = real ? undefined : await startEventStoreDouble();
    const connectionString = real ?? double!.connectionString;
    return {
      connect: async () => createEventStoreDbEventLog({ connectionString }),
      teardown: async () => double?.stop(),
    };
  },
  { refusedData: { text: 'x'.repeat(DEFAULT_MAX_APPEND_SIZE) }, atomicMultiStream: false },
);
