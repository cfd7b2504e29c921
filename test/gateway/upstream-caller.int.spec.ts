import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { gzipSync } from 'node:zlib';
import type { Readable } from 'node:stream';
import {
  clientResponseHeaders,
  UpstreamCaller,
  type UpstreamRequest,
  type UpstreamResult,
} from '../../apps/ledger/src/gateway/upstream-caller.js';
import { UpstreamPools } from '../../apps/ledger/src/gateway/upstream-pools.js';
import { parseUpstreams, type Upstream } from '../../apps/ledger/src/gateway/upstreams-config.js';
import { LedgerMetrics } from '../../apps/ledger/src/metrics/ledger-metrics.js';

/**
 * The caller against real local HTTP servers standing in for a provider, scripted per key. The key
 * pool runs on a clock the test moves, so cooldowns are checked to the millisecond without waiting.
 */

interface Arrival {
  readonly key: string;
  readonly session: string;
  /** The test clock when the request arrived. */
  readonly at: number;
  readonly headers: IncomingHttpHeaders;
  readonly response: ServerResponse;
}

/** An answer, or no answer at all ('hang'), or a dropped connection ('reset'). */
type Reply =
  | {
      readonly status: number;
      readonly headers?: Record<string, string>;
      readonly chunks?: readonly (string | Buffer)[];
    }
  | 'hang'
  | 'reset';

interface Provider {
  readonly baseUrl: string;
  readonly arrivals: Arrival[];
  /** Emits 'arrival' for each request. */
  readonly events: EventEmitter;
  close(): Promise<void>;
}

class ManualClock {
  time = Date.UTC(2026, 10, 22, 12, 0, 0);
  now(): number {
    return this.time;
  }
}

async function startProvider(clock: ManualClock, script: (arrival: Arrival) => Reply): Promise<Provider> {
  const arrivals: Arrival[] = [];
  const events = new EventEmitter();
  const server = createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      const bearer = request.headers.authorization?.replace(/^Bearer /, '');
      const key = String(request.headers['x-api-key'] ?? bearer);
      const { session } = JSON.parse(Buffer.concat(parts).toString('utf8')) as { session: string };
      const arrival = { key, session, at: clock.now(), headers: request.headers, response };
      arrivals.push(arrival);
      events.emit('arrival', arrival);
      const reply = script(arrival);
      if (reply === 'hang') return;
      if (reply === 'reset') return request.socket.destroy();
      response.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      for (const chunk of reply.chunks ?? [`{"served_by":"${key.slice(-1)}"}`]) response.write(chunk);
      response.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    arrivals,
    events,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

const rateLimited = (retryAfterSeconds: number): Reply => ({
  status: 429,
  headers: { 'retry-after': String(retryAfterSeconds) },
  chunks: [`{"error":{"type":"rate_limit_error","retry_after":${retryAfterSeconds}}}`],
});

/** A 401 quoting the key, as OpenAI's does. */
const unauthorized = (key: string): Reply => ({
  status: 401,
  chunks: [`{"error":{"message":"Incorrect API key provided: ${key}"}}`],
});

async function bytesOf(body: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

describe('UpstreamCaller', () => {
  let clock: ManualClock;
  let provider: Provider | undefined;
  let caller: UpstreamCaller | undefined;
  let metrics: LedgerMetrics;
  beforeEach(() => {
    clock = new ManualClock();
    metrics = new LedgerMetrics();
  });
  afterEach(async () => {
    caller?.close();
    await provider?.close();
    caller = provider = undefined;
  });

  /** Starts the double and a caller with one upstream holding `keys` (weight 1 each). */
  async function setUp(
    keys: string[],
    script: (arrival: Arrival) => Reply,
    options: { protocol?: string; timeoutMs?: number } = {},
  ) {
    provider = await startProvider(clock, script);
    const { protocol = 'openai', timeoutMs = 30_000 } = options;
    const keyList = keys.map((key) => ({ key }));
    const configured = { name: 'main', protocol, baseUrl: provider.baseUrl, models: '*', keys: keyList };
    const upstream: Upstream = parseUpstreams({ upstreams: [configured] }, {})[0];
    const pools = new UpstreamPools(() => [upstream], { clock, observer: metrics });
    metrics.watchUpstreamKeys(() => pools.availableKeys());
    caller = new UpstreamCaller(pools, { timeoutMs, observer: metrics });
    return { upstream, pool: pools.pool('main') };
  }

  function request(session: string, fields: Partial<UpstreamRequest> = {}): UpstreamRequest {
    return {
      path: '/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ model: 'gpt-4o', session })),
      sessionId: session,
      signal: new AbortController().signal,
      ...fields,
    };
  }

  async function call(upstream: Upstream, session: string, fields: Partial<UpstreamRequest> = {}) {
    const result = await caller!.call(upstream, request(session, fields));
    const bytes = result.kind === 'response' ? await bytesOf(result.body) : undefined;
    return { result, bytes, body: bytes?.toString('utf8') };
  }

  it('serves every request through a 429 storm while a key stays healthy, keeping cooldowns and affinity', async () => {
    const keys = ['sk-storm-a', 'sk-storm-b', 'sk-storm-c'];
    let storm = false;
    const retryAfter: Record<string, number> = { 'sk-storm-a': 2, 'sk-storm-b': 3 };
    const script = ({ key }: Arrival) =>
      storm && key !== 'sk-storm-c' ? rateLimited(retryAfter[key]) : { status: 200 };
    const { upstream } = await setUp(keys, script);
    const sessions = ['s0', 's1', 's2', 's3', 's4', 's5'];

    // Calm: every session stays on the key it first got.
    for (let round = 0; round < 3; round++) {
      for (const session of sessions) expect((await call(upstream, session)).result).toMatchObject({ status: 200 });
    }
    const keyOf = (session: string) => provider!.arrivals.find((arrival) => arrival.session === session)!.key;
    const calmKey = new Map(sessions.map((session) => [session, keyOf(session)]));
    for (const arrival of provider!.arrivals) expect(arrival.key).toBe(calmKey.get(arrival.session));
    expect(new Set(calmKey.values()).size).toBe(3);

    storm = true;
    const calmArrivals = provider!.arrivals.length;
    for (let index = 0; index < 120; index++) {
      // Old sessions come back; new ones keep landing on the rate-limited keys once they cool off.
      const session = index % 2 === 0 ? `new-${index}` : sessions[index % sessions.length];
      const { result, body } = await call(upstream, session);
      expect(result).toMatchObject({ kind: 'response', status: 200 });
      expect(body).toBe('{"served_by":"c"}');
      clock.time += 100;
    }

    const stormArrivals = provider!.arrivals.slice(calmArrivals);
    // Each cooled key is not tried again before its Retry-After.
    for (const key of ['sk-storm-a', 'sk-storm-b']) {
      const times = stormArrivals.filter((arrival) => arrival.key === key).map((arrival) => arrival.at);
      expect(times.length).toBeGreaterThan(2);
      const gaps = times.slice(1).map((time, index) => time - times[index]);
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(retryAfter[key] * 1_000);
    }
    // Sessions on the healthy key never left it; every session that moved stayed on the healthy key.
    for (const session of sessions) {
      // A request's attempts arrive one after another; its first attempt is the key the pool chose for it.
      const firstAttempts = stormArrivals.filter(
        (arrival, index) => arrival.session === session && stormArrivals[index - 1]?.session !== session,
      );
      const moved = calmKey.get(session) !== 'sk-storm-c';
      expect(firstAttempts.slice(moved ? 1 : 0).every((arrival) => arrival.key === 'sk-storm-c')).toBe(true);
    }
    const text = await metrics.registry.metrics();
    const hashC = upstream.keys[2].hash;
    const attempts = 'ledger_gateway_upstream_attempts_total';
    const hashA = upstream.keys[0].hash;
    expect(text).toMatch(new RegExp(`${attempts}\\{upstream="main",key="${hashA}",outcome="rate_limited"\\} \\d`));
    expect(text).toMatch(new RegExp(`${attempts}\\{upstream="main",key="${hashC}",outcome="ok"\\} \\d`));
    expect(text).not.toMatch(new RegExp(`key="${hashC}",reason=`));
    expect(text).not.toContain('sk-storm');
  });

  it('never uses a key again after its 401, and never relays the 401 that may quote the key', async () => {
    const script = ({ key }: Arrival): Reply => (key === 'sk-revoked' ? unauthorized(key) : { status: 200 });
    const { upstream } = await setUp(['sk-revoked', 'sk-valid'], script);
    const results: UpstreamResult[] = [];
    for (let index = 0; index < 10; index++) {
      const { result } = await call(upstream, `session-${index}`);
      expect(result).toMatchObject({ status: 200, key: upstream.keys[1].hash });
      results.push(result);
      clock.time += 3_600_000;
    }
    expect(provider!.arrivals.filter((arrival) => arrival.key === 'sk-revoked')).toHaveLength(1);
    expect(await metrics.registry.metrics()).toContain(`ledger_gateway_upstream_available_keys{upstream="main"} 1`);
    expect(inspect(results, { depth: 20, showHidden: true })).not.toContain('sk-');
  });

  it("relays a 403 as the client's answer and keeps the key: a request cannot switch a key off for everyone", async () => {
    const forbidden: Reply = { status: 403, chunks: ['{"error":{"message":"no access to this model"}}'] };
    let arrivals = 0;
    const { upstream } = await setUp(['sk-only'], () => (++arrivals === 1 ? forbidden : { status: 200 }));
    const refused = await call(upstream, 's');
    expect(refused.result).toMatchObject({ status: 403 });
    expect((await call(upstream, 's')).result).toMatchObject({ status: 200, key: upstream.keys[0].hash });
    expect(await metrics.registry.metrics()).toContain(`ledger_gateway_upstream_available_keys{upstream="main"} 1`);
  });

  it('masks the key in an error body it relays, even quoted across two chunks, keeping its length', async () => {
    const quoted = '{"error":{"message":"upstream said: Bearer sk-quoted-key-1234 was refused"}}';
    const chunks = [quoted.slice(0, 54), quoted.slice(54)];
    expect(chunks[0].endsWith('sk-quoted-k')).toBe(true);
    const { upstream } = await setUp(['sk-quoted-key-1234'], () => ({ status: 500, chunks }));
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ status: 500 });
    expect(body).toBe(quoted.replace('sk-quoted-key-1234', '*'.repeat(18)));
  });

  it('masks the key wherever a non-2xx answer quotes it: headers, a redirect, its JSON-escaped and URL-encoded forms', async () => {
    const key = 'sk-"quoted"\\key-0123456789';
    const escaped = JSON.stringify(key).slice(1, -1);
    const replies: { status: number; headers: Record<string, string>; chunks: string[] }[] = [
      { status: 400, headers: { 'x-echo': `Bearer ${key}` }, chunks: [`{"error":"${escaped}"}`] },
      {
        status: 302,
        headers: { location: `https://elsewhere.example/?k=${encodeURIComponent(key)}&raw=${key}` },
        chunks: [key],
      },
    ];
    let arrivals = 0;
    const { upstream } = await setUp([key], () => replies[arrivals++]);
    for (let index = 0; index < replies.length; index += 1) {
      const { result, body } = await call(upstream, `s${index}`);
      expect(result.kind === 'response' && JSON.stringify(result.headers)).not.toContain('quoted');
      expect(body).not.toContain('quoted');
      // Masked in place: the length (and Content-Length) holds.
      expect(Buffer.byteLength(body!)).toBe(Buffer.byteLength(replies[index].chunks.join('')));
    }
  });

  it('relays no body of a non-2xx answer it cannot search (compressed against accept-encoding: identity)', async () => {
    const gzipped = gzipSync('{"error":"sk-compressed-key quoted"}');
    const { upstream } = await setUp(['sk-compressed-key'], () => ({
      status: 500,
      headers: { 'content-encoding': 'gzip', 'content-length': String(gzipped.length) },
      chunks: [gzipped],
    }));
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ status: 500 });
    expect(body).toBe('');
    expect(result.kind === 'response' && result.headers['content-encoding']).toBeUndefined();
  });

  it("leaves a local server's placeholder key in its answer's text, and reads an identity coding in any case", async () => {
    // `ollama` is no secret: masking it would change what the model said about itself.
    const text = 'install ollama, then `ollama pull llama3`';
    const { upstream } = await setUp(['ollama'], () => ({
      status: 200,
      headers: { 'content-encoding': 'Identity', 'content-type': 'application/json' },
      chunks: [text],
    }));
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ kind: 'response', status: 200 });
    expect(body).toBe(text);
  });

  it('answers 503 when every key is disabled, without the 401 body', async () => {
    const { upstream } = await setUp(['sk-revoked'], ({ key }) => unauthorized(key));
    const unavailable = { kind: 'unavailable', status: 503, retryAfterSeconds: undefined };
    expect((await call(upstream, 's')).result).toEqual(unavailable);
    expect((await call(upstream, 's')).result).toEqual(unavailable);
    expect(provider!.arrivals).toHaveLength(1);
  });

  it('passes the upstream bytes through unchanged, with the pool’s key for the client’s credentials', async () => {
    const chunks = [
      'data: {"choices":[{"delta":{"content":"h\u00e9"}}]}\n\n',
      Buffer.from('data: {"choices":[{"delta":{"content":"\u{1F600}').subarray(0, -2),
      Buffer.concat([Buffer.from('\u{1F600}').subarray(2), Buffer.from('"}}]}\n\ndata: [DONE]\n\n')]),
    ];
    const streamHeaders = { 'content-type': 'text/event-stream', 'x-request-id': 'req_1' };
    const { upstream } = await setUp(['sk-stream'], () => ({ status: 200, headers: streamHeaders, chunks }));
    const headers = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'user-agent': 'OpenAI/JS 7.57.0',
      authorization: 'Bearer ledger-producer-key',
      cookie: 'session=1',
      'openai-beta': 'assistants=v2',
      'openai-organization': 'org-client',
      'x-stainless-lang': 'js',
      'x-ledger-session': 'abc',
      'x-forwarded-for': '10.0.0.1',
      'accept-encoding': 'gzip, br',
      connection: 'keep-alive',
    };
    const { result, bytes } = await call(upstream, 's', { headers });
    expect(result).toMatchObject({ kind: 'response', status: 200, upstream: 'main', key: upstream.keys[0].hash });
    expect(result).toMatchObject({ headers: { 'content-type': 'text/event-stream', 'x-request-id': 'req_1' } });
    if (result.kind !== 'response') throw new Error('no response');
    // What a client may see: the provider's own headers, not hop-by-hop ones or its server's date (the ledger's is sent).
    expect(result.headers['transfer-encoding']).toBe('chunked');
    expect(result.headers.date).toBeDefined();
    expect(clientResponseHeaders(result.headers)).toEqual({
      'content-type': 'text/event-stream',
      'x-request-id': 'req_1',
    });
    expect(bytes!.toString('hex')).toBe(Buffer.concat(chunks.map((chunk) => Buffer.from(chunk))).toString('hex'));

    const sent = provider!.arrivals[0].headers;
    expect(sent).toMatchObject({
      authorization: 'Bearer sk-stream',
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'user-agent': 'OpenAI/JS 7.57.0',
      'openai-beta': 'assistants=v2',
      'x-stainless-lang': 'js',
      'accept-encoding': 'identity',
    });
    for (const dropped of ['cookie', 'openai-organization', 'x-ledger-session', 'x-forwarded-for', 'x-api-key']) {
      expect(sent[dropped]).toBeUndefined();
    }
  });

  it('sends an Anthropic key as x-api-key and keeps the Anthropic headers', async () => {
    const { upstream } = await setUp(['ak-pool'], () => ({ status: 200 }), { protocol: 'anthropic' });
    const anthropicHeaders = { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'interleaved-thinking-2025-05-14' };
    const headers = { 'x-api-key': 'ledger-producer-key', ...anthropicHeaders };
    await call(upstream, 's', { headers, path: '/messages?beta=true' });
    const sent = provider!.arrivals[0].headers;
    expect(sent).toMatchObject({ 'x-api-key': 'ak-pool', ...anthropicHeaders });
    expect(sent.authorization).toBeUndefined();
  });

  it('retries a timeout, a dropped connection and a 5xx on other keys, each key once', async () => {
    const replies: Record<string, Reply> = {
      'sk-slow': 'hang',
      'sk-drop': 'reset',
      'sk-500': { status: 500 },
      'sk-ok': { status: 200 },
    };
    const { upstream } = await setUp(Object.keys(replies), ({ key }) => replies[key], { timeoutMs: 200 });
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ status: 200, key: upstream.keys[3].hash });
    expect(body).toBe('{"served_by":"k"}');
    expect(provider!.arrivals.map((arrival) => arrival.key)).toEqual(['sk-slow', 'sk-drop', 'sk-500', 'sk-ok']);
    const text = await metrics.registry.metrics();
    for (const [index, outcome] of ['timeout', 'network', 'server_error', 'ok'].entries()) {
      const labels = `upstream="main",key="${upstream.keys[index].hash}",outcome="${outcome}"`;
      expect(text).toContain(`ledger_gateway_upstream_attempts_total{${labels}} 1`);
    }
  });

  it.each<[number, 'hang' | 'reset']>([
    [504, 'hang'],
    [502, 'reset'],
  ])('answers %i when the last key tried ends in a %s', async (status, reply) => {
    const { upstream } = await setUp(['sk-a'], () => reply, { timeoutMs: 200 });
    expect((await call(upstream, 's')).result).toEqual({ kind: 'unavailable', status, retryAfterSeconds: undefined });
  });

  it('returns the last refusal as it came when every key is out, then 429 until the soonest wait ends', async () => {
    const { upstream } = await setUp(['sk-a', 'sk-b'], ({ key }) => rateLimited(key === 'sk-a' ? 20 : 7));
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ status: 429, key: upstream.keys[1].hash, headers: { 'retry-after': '7' } });
    expect(body).toBe('{"error":{"type":"rate_limit_error","retry_after":7}}');
    const refusedAt = clock.time;
    clock.time += 2_500;
    expect((await call(upstream, 's')).result).toEqual({ kind: 'unavailable', status: 429, retryAfterSeconds: 5 });
    clock.time = refusedAt + 6_999;
    expect((await call(upstream, 's')).result).toEqual({ kind: 'unavailable', status: 429, retryAfterSeconds: 1 });
    expect(provider!.arrivals).toHaveLength(2);
    clock.time = refusedAt + 7_000;
    expect((await call(upstream, 's')).result).toMatchObject({ status: 429, key: upstream.keys[1].hash });
    expect(provider!.arrivals.map((arrival) => arrival.key)).toEqual(['sk-a', 'sk-b', 'sk-b']);
  });

  it('returns the client’s own 4xx as it is, without trying another key', async () => {
    const badRequest = { status: 400, chunks: ['{"error":{"param":"messages"}}'] };
    const { upstream, pool } = await setUp(['sk-a', 'sk-b'], () => badRequest);
    const { result, body } = await call(upstream, 's');
    expect(result).toMatchObject({ status: 400 });
    expect(body).toBe('{"error":{"param":"messages"}}');
    expect(provider!.arrivals).toHaveLength(1);
    expect(pool.availableCount()).toBe(2);
  });

  it('aborts the attempt when the client goes away before the answer, without blaming the key', async () => {
    const { upstream, pool } = await setUp(['sk-a'], () => 'hang');
    const client = new AbortController();
    const arrived = once(provider!.events, 'arrival');
    const pending = caller!.call(upstream, request('s', { signal: client.signal }));
    const [arrival] = (await arrived) as [Arrival];
    const upstreamClosed = once(arrival.response, 'close');
    client.abort();
    expect(await pending).toEqual({ kind: 'aborted' });
    await upstreamClosed;
    expect(pool.availableCount()).toBe(1);
  });

  it('aborts the upstream stream when the client goes away mid-stream', async () => {
    let upstreamResponse: ServerResponse | undefined;
    const { upstream } = await setUp(['sk-a'], ({ response }) => {
      upstreamResponse = response;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: {"partial":true}\n\n');
      return 'hang';
    });
    const client = new AbortController();
    const result = await caller!.call(upstream, request('s', { signal: client.signal }));
    if (result.kind !== 'response') throw new Error('no response');
    const [first] = (await once(result.body, 'data')) as [Buffer];
    expect(first.toString()).toBe('data: {"partial":true}\n\n');
    const upstreamClosed = once(upstreamResponse!, 'close');
    const bodyFailed = once(result.body, 'error');
    client.abort();
    await Promise.all([upstreamClosed, bodyFailed]);
  });
});
