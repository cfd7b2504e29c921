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

/** A connection string as the client reads it (`parseConnectionString.js`), up to where it would stop. */
interface ReadConnectionString {
  /** The password as the client reads it, if any. */
  readonly password?: string;
  /** What follows the credentials (the whole string after the protocol without them). */
  readonly afterCredentials: string;
  /** `address:port` of each host; none when the client cannot read them (it stops before the query). */
  readonly hosts: readonly string[];
  /** The query's `key=value` pairs as written, in order, up to the first the client cannot read. */
  readonly options: readonly { readonly key: string; readonly value: string }[];
}

/**
 * Reads `connectionString` with the client's own grammar, expression for expression: a password may hold `?`, `&`
 * or `/`, and a key may hold `&` or `?`. Anything read otherwise would let a string past the checks below that the
 * client prints whole, or quote part of a password as the address.
 */
function readAsTheClient(connectionString: string): ReadConnectionString {
  const text = connectionString.trim().replace(/\/+$/, '');
  const protocol = /^(?:esdb|esdb\+discover):\/\//.exec(text);
  if (!protocol) return { afterCredentials: text, hosts: [], options: [] };
  let at = protocol[0].length;
  const credentials = /^(?:[^:]+:([^@]+)@)/.exec(text.slice(at));
  at += credentials?.[0].length ?? 0;
  const password = credentials?.[1];
  const afterCredentials = text.slice(at);
  const hosts: string[] = [];
  for (;;) {
    const host = /^(?:([^$+!?*'(),;[\]{}|"%~#<>=&]+)[,/]?)/.exec(text.slice(at));
    if (!host) break;
    const [address, port = '2113', ...rest] = host[1].trim().split(':');
    if (rest.length > 0 || Number.isNaN(parseInt(port.trim())))
      return { password, afterCredentials, hosts: [], options: [] };
    hosts.push(`${address}:${parseInt(port.trim())}`);
    at += host[0].length;
  }
  if (hosts.length === 0) return { password, afterCredentials, hosts, options: [] };
  const options: { key: string; value: string }[] = [];
  for (let separator = '?'; at < text.length; separator = '&') {
    const pair = new RegExp(`^(?:[${separator}]([^=]+)=([^&?]+))`).exec(text.slice(at));
    if (!pair) break;
    options.push({ key: pair[1], value: pair[2] });
    at += pair[0].length;
  }
  return { password, afterCredentials, hosts, options };
}

/**
 * The hosts of an EventStoreDB connection string as the client reads them, for logs: never its credentials. None
 * when the client cannot read them.
 */
export function eventStoreAddress(connectionString: string): string | undefined {
  return readAsTheClient(connectionString).hosts.join(',') || undefined;
}

/** `text` without the password the client reads in `connectionString`. */
export function withoutPassword(text: string, connectionString: string): string {
  const { password } = readAsTheClient(connectionString);
  return password ? text.split(password).join('…') : text;
}

/**
 * Why the client would warn about `connectionString`'s query, or undefined. On an option it does not know, or on
 * `tlsVerifyCert=false` (which it ignores), it prints the whole string to the console, password included; so such a
 * string is refused before the client sees it, with a reason that names the key and nothing else. A string it
 * cannot read stops it with a parse error of its own, which quotes nothing (after the warnings of the pairs before).
 */
export function eventStoreConnectionStringProblem(connectionString: string): string | undefined {
  const { afterCredentials, options } = readAsTheClient(connectionString);
  // The client ends the credentials at the first `@`: what follows another is the rest of a password, which a host
  // or a key named here would show.
  if (afterCredentials.includes('@')) return 'an `@` follows the credentials: write one in the password as %40';
  for (const { key, value } of options) {
    // `dnsDiscover` (the esdb+discover:// protocol's switch) is read too, spelled exactly so.
    if (!KNOWN_OPTIONS.has(flat(key)) && key !== 'dnsDiscover')
      return `the option ${JSON.stringify(key)} is not one the client knows`;
    if (flat(key) === 'tlsverifycert' && value.trim() === 'false')
      return 'tlsVerifyCert=false is ignored by the client; trust the server with tlsCAFile or NODE_EXTRA_CA_CERTS';
  }
  return undefined;
}
