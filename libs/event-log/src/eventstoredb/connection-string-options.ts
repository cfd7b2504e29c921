/**
 * The query options `@eventstore/db-client` reads from a connection string, compared as it compares them: trimmed,
 * lower-cased, without `-` and `_`.
 */
const KNOWN_OPTIONS = new Set(
  [
    'userCertFile',
    'userKeyFile',
    'maxDiscoverAttempts',
    'connectionName',
    'defaultDeadline',
    'discoveryInterval',
    'gossipTimeout',
    'nodePreference',
    'tls',
    'tlsVerifyCert',
    'tlsCAFile',
    'throwOnAppendFailure',
    'keepAliveInterval',
    'keepAliveTimeout',
  ].map(flat),
);

function flat(key: string): string {
  return key.trim().toLowerCase().replace(/[_-]/g, '');
}

/**
 * Why the client would warn about `connectionString`'s query, or undefined. On an option it does not know, or on
 * `tlsVerifyCert=false` (which it ignores), it prints the whole string to the console, password included; so such a
 * string is refused before the client sees it, with a reason that names the key and nothing else.
 */
export function eventStoreQueryProblem(connectionString: string): string | undefined {
  // The password may hold a `?`; the hosts that follow the credentials cannot.
  const afterCredentials = connectionString.replace(/^[^:]+:\/\/(?:[^:]+:[^@]+@)?/, '');
  const query = afterCredentials.indexOf('?');
  if (query < 0) return undefined;
  for (const pair of afterCredentials.slice(query + 1).split('&')) {
    const separator = pair.indexOf('=');
    // A pair the client cannot read stops it with a parse error of its own, which quotes nothing.
    if (separator <= 0) continue;
    const written = pair.slice(0, separator);
    const key = flat(written);
    // `dnsDiscover` (the esdb+discover:// protocol's switch) is read too, spelled exactly so.
    if (!KNOWN_OPTIONS.has(key) && written !== 'dnsDiscover')
      return `the option ${JSON.stringify(written)} is not one the client knows`;
    if (key === 'tlsverifycert' && pair.slice(separator + 1).trim() === 'false')
      return 'tlsVerifyCert=false is ignored by the client; trust the server with tlsCAFile or NODE_EXTRA_CA_CERTS';
  }
  return undefined;
}
