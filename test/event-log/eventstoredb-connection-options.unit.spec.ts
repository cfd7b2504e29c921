import { fileURLToPath } from 'node:url';
import { EventStoreDBClient } from '@eventstore/db-client';
import { jest } from '@jest/globals';
import { eventStoreQueryProblem } from '#event-log';

/**
 * The check agrees with the client it guards: every string it takes, the client reads without a console warning
 * (which would quote the password), and every string it refuses makes the client warn. A client upgrade that adds,
 * renames or drops an option fails here.
 */
describe('the EventStoreDB connection string check', () => {
  // The client reads the CA file as it starts (any file will do); it parses client certificates, left out for that.
  const readable = encodeURIComponent(fileURLToPath(import.meta.url));
  const clientWarns = (connectionString: string) => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      void EventStoreDBClient.connectionString(connectionString);
      return warn.mock.calls.length > 0;
    } finally {
      warn.mockRestore();
    }
  };

  it.each([
    'esdb://localhost:2113',
    'esdb://admin:changeit@localhost:2113?tls=false',
    'esdb://admin:ch?ange@localhost:2113?tls=false&tlsVerifyCert=true',
    'esdb://a:2113,b:2113?Node-Preference=follower&max_discover_attempts=3&discoveryInterval=100&gossipTimeout=5',
    'esdb://localhost:2113?defaultDeadline=10&keepAliveInterval=10000&keepAliveTimeout=10&throwOnAppendFailure=true',
    `esdb://localhost:2113?connectionName=x&tlsCAFile=${readable}`,
    'esdb+discover://cluster:2113?dnsDiscover=true',
    'esdb://localhost:2113?dnsdiscover=true',
    'esdb://localhost:2113?tlsVerifyCert=false',
    'esdb://localhost:2113?tls=false&TLS_VERIFY_CERT=false',
    'esdb://admin:changeit@localhost:2113?tls=false&password=changeit',
    'esdb://localhost:2113?tls=false&tlsVerfyCert=true',
  ])('%s', (connectionString) => {
    expect(eventStoreQueryProblem(connectionString) !== undefined).toBe(clientWarns(connectionString));
  });
});
