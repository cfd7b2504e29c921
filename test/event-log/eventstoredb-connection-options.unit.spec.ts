import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { EventStoreDBClient } from '@eventstore/db-client';
import { inspect } from 'node:util';
import { ConnectionStringError, eventStoreAddress, eventStoreConnectionStringProblem } from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { withoutPassword } from '../../libs/event-log/src/eventstoredb/connection-string-options.js';

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

  // Taken: the client reads each without a word (or fails on it without one).
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
    'esdb://admin:%40dmin@localhost:2113?tls=false',
    // Strings the client cannot read: it refuses them itself, quoting nothing, after no warning.
    'esdb://db:2113?tls',
    'esdb://admin:s3cret@localhost?tls=0',
    'esdb://admin:s3cret@localhost:2113:1',
    'esdb://admin:s3cret@localhost?keepAliveTimeout=-5',
  ])('takes %s', (connectionString) => {
    expect(eventStoreConnectionStringProblem(connectionString)).toBeUndefined();
    expect(clientWarns(connectionString)).toBe(false);
  });

  // Refused: every string the client warns on (it would print the password), and an `@` after the credentials.
  it.each([
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
    // The client ends the password at its first `@`: the rest would show as a host or in a key.
    'esdb://admin:p@ss@esdb:2113',
    'esdb://admin:pa@ss?word=x@h',
    'esdb://admin:p@ss:S3cr3t@db?tls=false&unknown=1',
    'esdb://:pw?S3cr3t=x@db',
  ])('refuses %s', (connectionString) => {
    expect(eventStoreConnectionStringProblem(connectionString)).toBeDefined();
  });

  it('logs the hosts the client reads, never a credential', () => {
    expect(eventStoreAddress('esdb://admin:pa?S3cr3t@127.0.0.1:1?tls=false')).toBe('127.0.0.1:1');
    expect(eventStoreAddress('esdb://admin:1234?x/y@db?tls=false')).toBe('db:2113');
    expect(eventStoreAddress('esdb+discover://a:2113,b:2114/?tls=false')).toBe('a:2113,b:2114');
    // The client stops at the port: nothing of the string is an address.
    expect(eventStoreAddress('esdb://:pw?S3cr3t=x@db')).toBeUndefined();
    expect(eventStoreAddress('esdb://admin:p@ss:S3cr3t@db')).toBeUndefined();
  });

  // The client's own errors carry the whole string: a command line that printed one printed the password.
  it.each<[string, string]>([
    ['esdb://admin:s3cret@localhost?tls=0', 'cannot be read: true or false expected at character 34'],
    ['esdb://admin:s3cret@localhost:2113:1', 'cannot be read: , or ?key=value expected at character 34'],
    [
      'esdb://admin:s3cret@localhost?keepAliveTimeout=-5',
      'is refused by the client: Invalid keepAliveTimeout "-5". Please provide a positive integer, or -1 to disable.',
    ],
    ['esdb://admin:s3%zzret@localhost', 'is refused by the client: URI malformed'],
  ])('a string the client cannot use fails the adapter with what is wrong alone: %s', (connectionString, problem) => {
    let thrown: unknown;
    try {
      createEventStoreDbEventLog({ connectionString });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConnectionStringError);
    expect((thrown as Error).message).toBe(problem);
    expect(inspect(thrown)).not.toMatch(/s3cret|s3%zzret/);
  });

  it('takes the password out of what it tells', () => {
    expect(withoutPassword('tried s3cret twice: s3cret', 'esdb://admin:s3cret@db?tls=false')).toBe('tried … twice: …');
    expect(withoutPassword('nothing to hide', 'esdb://db?tls=false')).toBe('nothing to hide');
  });
});
