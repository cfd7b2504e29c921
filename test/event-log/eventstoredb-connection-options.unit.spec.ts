import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { EventStoreDBClient } from '@eventstore/db-client';
import { eventStoreAddress, eventStoreQueryProblem } from '#event-log';

/**
 * The check agrees with the client it guards: every string it takes, the client reads without a console warning
 * (which would quote the password), and every string it refuses makes the client warn. A client upgrade that adds,
 * renames or drops an option, or reads the string otherwise, fails here.
 */
describe('the EventStoreDB connection string check', () => {
  // The client reads the CA file as it starts (any file will do); it parses client certificates, left out for that.
  const readable = encodeURIComponent(fileURLToPath(import.meta.url));
  const clientWarns = (connectionString: string) => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      void EventStoreDBClient.connectionString(connectionString);
    } catch {
      // A string the client cannot read: what counts is whether it warned first.
    }
    const warned = warn.mock.calls.length > 0;
    warn.mockRestore();
    return warned;
  };

  it.each([
    'esdb://localhost:2113',
    'esdb://admin:changeit@localhost:2113?tls=false',
    'esdb://admin:ch?ange@localhost:2113?tls=false&tlsVerifyCert=true',
    'esdb://a:2113,b:2113?Node-Preference=follower&max_discover_attempts=3&discoveryInterval=100&gossipTimeout=5',
    'esdb://localhost:2113?defaultDeadline=10&keepAliveInterval=10000&keepAliveTimeout=10&throwOnAppendFailure=true',
    `esdb://localhost:2113?connectionName=x&tlsCAFile=${readable}`,
    'esdb+discover://cluster:2113?dnsDiscover=true',
    'esdb://localhost:2113/?tls=false/',
    ' esdb://localhost:2113?tls=false ',
    // Refused: options the client does not know, tlsVerifyCert=false.
    'esdb://localhost:2113?dnsdiscover=true',
    'esdb://localhost:2113?tlsVerifyCert=false',
    'esdb://localhost:2113?tls=false&TLS_VERIFY_CERT=false',
    'esdb://admin:changeit@localhost:2113?tls=false&password=changeit',
    'esdb://localhost:2113?tls=false&tlsVerfyCert=true',
    // Read as the client reads them: an empty pair, a key without a value, a trailing slash, a `?` ending a value.
    'esdb://admin:S3cr3t@db:2113?&tls=false',
    'esdb://admin:S3cr3t@db:2113?tls=false&&tls=false',
    'esdb://admin:S3cr3t@db:2113?x&tls=false',
    'esdb://admin:S3cr3t@db:2113?tls=false&tlsVerifyCert=false/',
    'esdb://admin:S3cr3t@db:2113?tlsVerifyCert=false?tls=false',
    // Strings the client stops on before the query: a parse error of its own, which quotes nothing.
    'esdb://:pw?S3cr3t=x@db',
    'esdb://admin:p@ss:S3cr3t@db?tls=false&unknown=1',
    'esdb://db:2113?tls',
  ])('%s', (connectionString) => {
    expect(eventStoreQueryProblem(connectionString) !== undefined).toBe(clientWarns(connectionString));
  });

  it('logs the hosts the client reads, never a credential', () => {
    expect(eventStoreAddress('esdb://admin:pa?S3cr3t@127.0.0.1:1?tls=false')).toBe('127.0.0.1:1');
    expect(eventStoreAddress('esdb://admin:1234?x/y@db?tls=false')).toBe('db:2113');
    expect(eventStoreAddress('esdb+discover://a:2113,b:2114/?tls=false')).toBe('a:2113,b:2114');
    // The client stops at the port: nothing of the string is an address.
    expect(eventStoreAddress('esdb://:pw?S3cr3t=x@db')).toBeUndefined();
    expect(eventStoreAddress('esdb://admin:p@ss:S3cr3t@db')).toBeUndefined();
  });
});
