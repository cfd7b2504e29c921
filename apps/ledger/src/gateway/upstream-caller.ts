import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import { pipeline, Readable, Transform } from 'node:stream';
import { maskForms, secretForms } from '#core';
import type { AttemptOutcome, KeyPool, KeyPoolObserver } from './key-pool.js';
import type { UpstreamPools } from './upstream-pools.js';
import type { Upstream, UpstreamKey } from './upstreams-config.js';

/** Where the caller reports each attempt (LedgerMetrics). Keys are named by their short hash. */
export interface UpstreamObserver extends KeyPoolObserver {
  upstreamAttempt(upstream: string, key: string, outcome: AttemptOutcome): void;
}

export interface UpstreamRequest {
  /** The path under the provider's `/v1`, query included: `/chat/completions`, `/messages?beta=true`. */
  readonly path: string;
  /** The client's headers (lower-case names, as node gives them); only provider headers are passed on. */
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** Keeps the session on one key while it is healthy, so provider prompt caches hit. */
  readonly sessionId: string | undefined;
  /** The client going away: aborts the attempt under way, before or after the response headers. */
  readonly signal: AbortSignal;
}

/**
 * What the provider answered, unconsumed: a success, a client error (4xx other than 401/403/429),
 * or, once no other key could be tried, the last 429 or 5xx exactly as it came.
 */
export interface UpstreamResponse {
  readonly kind: 'response';
  readonly status: number;
  /** As the provider sent them, hop-by-hop ones included: relay them through `clientResponseHeaders`. */
  readonly headers: IncomingHttpHeaders;
  /**
   * The bytes as they come. Read it to the end or destroy it; it errors when `signal` aborts or the
   * provider breaks off mid-stream. (Not the IncomingMessage itself: that holds the request, key included.)
   */
  readonly body: Readable;
  readonly upstream: string;
  /** The short hash of the key that got this answer. */
  readonly key: string;
}

/**
 * No answer to relay: every key is cooling or disabled (429 when the soonest key back was rate
 * limited, else 503), or the last attempt found no server (502) or no answer in time (504).
 */
export interface UpstreamUnavailable {
  readonly kind: 'unavailable';
  readonly status: 429 | 502 | 503 | 504;
  /** Whole seconds until a key comes back; `undefined` when none will before a reload. */
  readonly retryAfterSeconds: number | undefined;
}

export type UpstreamResult = UpstreamResponse | UpstreamUnavailable | { readonly kind: 'aborted' };

export interface UpstreamCallerOptions {
  /** Time allowed from sending the request to the response headers (`LEDGER_GATEWAY_UPSTREAM_TIMEOUT_MS`). */
  readonly timeoutMs: number;
  readonly observer?: UpstreamAttemptObserver;
}

type UpstreamAttemptObserver = Pick<UpstreamObserver, 'upstreamAttempt'>;

// The client's headers the provider needs; everything else (its credentials, cookies, hop-by-hop
// headers, forwarding and ledger headers) stays here.
const FORWARDED_HEADERS = new Set([
  'content-type',
  'accept',
  'user-agent',
  'anthropic-version',
  'anthropic-beta',
  'openai-beta',
]);
const FORWARDED_PREFIX = 'x-stainless-';

type Attempt =
  | { readonly kind: 'response'; readonly response: IncomingMessage }
  | { readonly kind: 'timeout' | 'network' | 'aborted' }
  /** A kept-alive connection the provider had closed meanwhile: the request never reached it. */
  | { readonly kind: 'stale_connection' };

class HeadersTimeout extends Error {}

/**
 * Sends a client's request to an upstream with a key from its pool. A failed attempt (429, 401/403,
 * 5xx, no connection, no headers in time) is retried on another key — each key at most once per
 * request, and always before a byte has reached the client, since only the final answer is returned.
 */
export class UpstreamCaller {
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(
    private readonly pools: UpstreamPools,
    private readonly options: UpstreamCallerOptions,
  ) {}

  async call(upstream: Upstream, request: UpstreamRequest): Promise<UpstreamResult> {
    const pool = this.pools.pool(upstream.name);
    const tried = new Set<string>();
    let refusal: UpstreamResponse | undefined;
    let lastFailure: 'timeout' | 'network' | undefined;
    let staleRetried = false;
    for (;;) {
      if (request.signal.aborted) return this.aborted(refusal);
      const key = pool.pick(request.sessionId, tried);
      if (!key) break;
      // Another key will answer instead: the refusal held so far is not needed.
      refusal?.body.resume();
      refusal = undefined;
      tried.add(key.hash);
      const attempt = await this.attempt(upstream, key, request);
      if (attempt.kind === 'aborted') return this.aborted(undefined);
      if (attempt.kind === 'stale_connection' && !staleRetried) {
        // Not the key's fault: the same key again, on a fresh connection.
        staleRetried = true;
        tried.delete(key.hash);
        continue;
      }
      const outcome =
        attempt.kind === 'response' ? outcomeOf(attempt.response) : attempt.kind === 'timeout' ? 'timeout' : 'network';
      this.options.observer?.upstreamAttempt(upstream.name, key.hash, outcome);
      if (attempt.kind !== 'response' || outcome === 'network') {
        // An answer no client can be given is no answer.
        if (attempt.kind === 'response') attempt.response.resume();
        pool.report(key, outcome);
        lastFailure = outcome === 'timeout' ? 'timeout' : 'network';
        continue;
      }
      const { response } = attempt;
      pool.report(key, outcome, {
        retryAfter: header(response, 'retry-after'),
        retryAfterMs: header(response, 'retry-after-ms'),
      });
      lastFailure = undefined;
      if (outcome === 'unauthorized') {
        // About the gateway's key, not the client's, and its body may quote the key: never relayed.
        response.resume();
        continue;
      }
      const answer: UpstreamResponse = {
        kind: 'response',
        status: response.statusCode!,
        ...answerOf(response, key.value()),
        upstream: upstream.name,
        key: key.hash,
      };
      if (outcome === 'ok' || outcome === 'client_error') return answer;
      refusal = answer;
    }
    return refusal ?? unavailable(pool, lastFailure);
  }

  /** Closes the kept-alive connections to the providers. */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private aborted(refusal: UpstreamResponse | undefined): UpstreamResult {
    refusal?.body.destroy();
    return { kind: 'aborted' };
  }

  private attempt(upstream: Upstream, key: UpstreamKey, request: UpstreamRequest): Promise<Attempt> {
    const url = new URL(upstream.baseUrl + request.path);
    const secure = url.protocol === 'https:';
    return new Promise((resolve) => {
      const outgoing = (secure ? https : http).request(url, {
        method: 'POST',
        headers: upstreamHeaders(upstream, key, request),
        agent: secure ? this.agents.https : this.agents.http,
        signal: request.signal,
      });
      const timer = setTimeout(() => outgoing.destroy(new HeadersTimeout()), this.options.timeoutMs);
      outgoing.once('response', (response) => {
        clearTimeout(timer);
        resolve({ kind: 'response', response });
      });
      // A 101 (switching protocols) is no answer to relay; without this listener node drops the connection and
      // the request only closes, with no error, after the timer has already fired on it. A close with neither an
      // answer nor an error is a failed attempt; a turn later, so that an error heard with it classifies it first.
      outgoing.once('upgrade', (_response, socket) => socket.destroy());
      outgoing.once('close', () => {
        clearTimeout(timer);
        setImmediate(() => resolve({ kind: request.signal.aborted ? 'aborted' : 'network' }));
      });
      // Kept for the request's whole life: an abort after the headers errors it again, and an
      // unheard 'error' would end the process. Resolving twice is harmless.
      outgoing.on('error', (error) => {
        clearTimeout(timer);
        if (request.signal.aborted) resolve({ kind: 'aborted' });
        else if (outgoing.reusedSocket && (error as NodeJS.ErrnoException).code === 'ECONNRESET')
          resolve({ kind: 'stale_connection' });
        else resolve({ kind: error instanceof HeadersTimeout ? 'timeout' : 'network' });
      });
      outgoing.end(request.body);
    });
  }
}

// Which provider account the gateway's keys belong to is not the client's business.
const ACCOUNT_HEADERS = new Set(['openai-organization', 'openai-project', 'anthropic-organization-id']);
/**
 * What a provider's answer may tell a client, by name: the body's form, the provider's request id, its retry guidance
 * (read by both SDKs) and its own `openai-*` / `anthropic-*` and rate-limit headers. Anything else a provider (or a
 * proxy before it) sends is dropped: a browser or an SDK acts on headers such as `location` (a redirect the client
 * would follow with its ledger credential), `set-cookie`, `refresh`, `clear-site-data`, `link`, `cache-control`,
 * `access-control-*`, `www-authenticate`, `strict-transport-security` or `x-ledger-*` as if the ledger had said them.
 */
const PROVIDER_HEADERS = new Set([
  'content-type',
  'content-length',
  'x-request-id',
  'request-id',
  'retry-after',
  'retry-after-ms',
  'x-should-retry',
]);
const PROVIDER_HEADER_PREFIX = /^(openai-|anthropic-|x-ratelimit-)/;

/** The provider's response headers a client may receive (`PROVIDER_HEADERS`), without the account the keys belong to. */
export function clientResponseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const relayed = ([name, value]: [string, unknown]) =>
    value !== undefined &&
    (PROVIDER_HEADERS.has(name) || PROVIDER_HEADER_PREFIX.test(name)) &&
    !ACCOUNT_HEADERS.has(name);
  return Object.fromEntries(Object.entries(headers).filter(relayed));
}

function upstreamHeaders(upstream: Upstream, key: UpstreamKey, request: UpstreamRequest): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const lowerName = name.toLowerCase();
    const forwarded = FORWARDED_HEADERS.has(lowerName) || lowerName.startsWith(FORWARDED_PREFIX);
    if (forwarded && value !== undefined) headers[lowerName] = value;
  }
  // The recorder reads the bytes as they come: no compression.
  headers['accept-encoding'] = 'identity';
  headers['content-length'] = request.body.length;
  if (upstream.protocol === 'openai') headers.authorization = `Bearer ${key.value()}`;
  else headers['x-api-key'] = key.value();
  return headers;
}

/**
 * A provider's answer as the client may get it. Errors reach the reader through the stream piped into, which
 * pipeline destroys with them. Any answer may quote the key it was sent (a provider, or a proxy before it), in its
 * headers or body, as is, JSON-escaped or URL-encoded: masked before any client sees it or the record reads it (a
 * short key, such as a local server's placeholder `ollama`, is no secret: `secretForms`). A refusal's body encoded
 * (compressed) against the request's `accept-encoding: identity` cannot be searched: not relayed (`outcomeOf` takes
 * an encoded success for no answer at all).
 */
function answerOf(response: IncomingMessage, secret: string): Pick<UpstreamResponse, 'headers' | 'body'> {
  const forms = secretForms(secret);
  const mask = (value: string) => maskForms(value, forms);
  const headers = Object.fromEntries(
    Object.entries(response.headers).map(([name, value]) => [
      name,
      Array.isArray(value) ? value.map(mask) : value === undefined ? value : mask(value),
    ]),
  );
  if (encoded(response)) {
    response.resume();
    delete headers['content-encoding'];
    headers['content-length'] = '0';
    return { headers, body: Readable.from([]) };
  }
  return { headers, body: pipeline(response, maskingSecrets(forms), () => {}) };
}

/** Codings a client's fetch decodes (and the record could not read): any other leaves the bytes as they came. */
const DECODED_CODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'zstd']);
const encoded = (response: IncomingMessage) =>
  (response.headers['content-encoding'] ?? '')
    .split(',')
    .some((coding) => DECODED_CODINGS.has(coding.trim().toLowerCase()));

/**
 * Passes bytes through with every occurrence of each secret overwritten by as many `*`, so lengths (and the
 * response's Content-Length) hold. A chunk's last bytes wait for the next only while they could begin a secret,
 * so an event ending in a line break (no secret holds one) goes on at once.
 */
function maskingSecrets(secrets: readonly string[]): Transform {
  const needles = secrets.map((secret) => Buffer.from(secret));
  let held = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const bytes = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      for (const needle of needles)
        for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + needle.length))
          bytes.fill('*', at, at + needle.length);
      const kept = secretStartAtEnd(bytes, needles);
      held = Buffer.from(bytes.subarray(bytes.length - kept));
      done(null, bytes.subarray(0, bytes.length - kept));
    },
    flush(done) {
      done(null, held);
    },
  });
}

/** How many of the last bytes could be the start of a secret, the rest of which is still to come. */
function secretStartAtEnd(bytes: Buffer, needles: readonly Buffer[]): number {
  let kept = 0;
  for (const needle of needles) {
    // Only where the secret's first byte is, among the bytes too few to hold it whole: the earliest match is longest.
    const from = Math.max(0, bytes.length - needle.length + 1);
    for (let at = bytes.indexOf(needle[0], from); at !== -1; at = bytes.indexOf(needle[0], at + 1)) {
      if (needle.subarray(0, bytes.length - at).equals(bytes.subarray(at))) {
        kept = Math.max(kept, bytes.length - at);
        break;
      }
    }
  }
  return kept;
}

function outcomeOf(response: IncomingMessage): AttemptOutcome {
  const status = response.statusCode!;
  // No status a client can be given, or a success in an encoding the request did not accept (the client's fetch
  // would decode it, the record could not): no answer, as if the connection had failed.
  if (status < 200 || status > 599 || (status < 300 && encoded(response))) return 'network';
  if (status === 429) return 'rate_limited';
  // 401 is about the key. 403 can be about the request (a model the key may not use): a client's request
  // must not be able to switch a key off for everyone, so it is the client's answer.
  if (status === 401) return 'unauthorized';
  if (status >= 500) return 'server_error';
  if (status >= 400) return 'client_error';
  return 'ok';
}

function header(response: IncomingMessage, name: string): string | undefined {
  const value = response.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function unavailable(pool: KeyPool, lastFailure: 'timeout' | 'network' | undefined): UpstreamUnavailable {
  // `undefined`: a key is available but was already tried for this request.
  const out = pool.unavailable();
  const retryAfterSeconds = out?.retryAfterMs === undefined ? undefined : Math.ceil(out.retryAfterMs / 1_000);
  if (lastFailure) return { kind: 'unavailable', status: lastFailure === 'timeout' ? 504 : 502, retryAfterSeconds };
  return { kind: 'unavailable', status: out?.reason === 'rate_limited' ? 429 : 503, retryAfterSeconds };
}
