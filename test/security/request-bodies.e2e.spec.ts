import { gzipSync } from 'node:zlib';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { connect, until } from '../support/raw-connection.js';

/**
 * Attack: what the HTTP adapter reads before any route (decision 0043). Under Fastify the body
 * parsers, the inflating of compressed bodies, the router's case and trailing-slash rules and its
 * limit on a path parameter are ours to set; each must refuse what Express refused, name the
 * field, and let nothing reach the log or a route the permission table does not open.
 */
const MAX_BODY = 16 * 1024;

describe('attack: bodies, encodings and paths as the HTTP adapter reads them', () => {
  let ledger: LedgerUnderTest;
  let producer: string;
  let readerOnly: string;
  const sessionId = 'bodies-session';

  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_MAX_BODY_BYTES: String(MAX_BODY) });
    producer = `Bearer ${await ledger.credentials.key('client')}`;
    readerOnly = `Bearer ${await ledger.credentials.key('reader-only', { roles: ['reader'] })}`;
    expect((await ledger.request('POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
    const message = { id: 'a1', role: 'assistant', parentId: null };
    expect((await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, message)).status).toBe(201);
    // Read once as the writer, which waits for its own writes: the reader-only key's reads below then find them projected.
    expect((await ledger.request('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
  });
  afterAll(async () => {
    await ledger?.close();
  });

  const send = (path: string, body: Uint8Array | string, headers: Record<string, string>, authorization = producer) =>
    fetch(`${ledger.baseUrl}${path}`, { method: 'POST', headers: { authorization, ...headers }, body });
  const bodyOf = (response: Response): Promise<any> => response.json();
  const chunksPath = `/v1/sessions/${sessionId}/messages/a1/chunks`;
  const eventCount = async () =>
    (await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events.length as number;

  it('refuses a small compressed body that inflates past the limit (413), and appends nothing', async () => {
    const before = await eventCount();
    const chunks = [{ seq: 1, type: 'text.delta', text: 'a'.repeat(MAX_BODY * 4) }];
    const bomb = gzipSync(JSON.stringify(chunks));
    expect(bomb.length).toBeLessThan(MAX_BODY);
    const response = await send(chunksPath, bomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    expect(response.status).toBe(413);
    expect(await bodyOf(response)).toEqual({
      error: { code: 'body_too_large', message: `the request body exceeds ${MAX_BODY} bytes`, field: '(body)' },
    });
    expect(await eventCount()).toBe(before);
  });

  it('refuses a Content-Encoding it cannot inflate (415 naming it)', async () => {
    const response = await send('/v1/sessions', '{"id":"zstd"}', {
      'content-type': 'application/json',
      'content-encoding': 'zstd',
    });
    expect(response.status).toBe(415);
    expect((await bodyOf(response)).error).toMatchObject({ code: 'unsupported_media_type', field: 'content-encoding' });
    expect((await ledger.request('GET', '/v1/sessions/zstd')).status).toBe(404);
  });

  it('reads a JSON body only as an object or array: a JSON string is not a batch of NDJSON lines', async () => {
    const before = await eventCount();
    const lines = `${JSON.stringify({ seq: 1, type: 'llm_response_created' })}\n`;
    const response = await send(chunksPath, JSON.stringify(lines), { 'content-type': 'application/json' });
    expect(response.status).toBe(400);
    expect((await bodyOf(response)).error).toMatchObject({ code: 'malformed_json', field: '(body)' });
    expect(await eventCount()).toBe(before);
  });

  it('reads application/*+json as JSON', async () => {
    const response = await send('/v1/sessions', '{"id":"vendor-json"}', {
      'content-type': 'application/vnd.acme+json',
    });
    expect(response.status).toBe(201);
    expect((await bodyOf(response)).id).toBe('vendor-json');
  });

  it('refuses a path id past its length by name (400), however long, rather than as an unknown route', async () => {
    for (const length of [201, 5_000]) {
      const answer = await ledger.request('GET', `/v1/sessions/${'s'.repeat(length)}`);
      expect(answer).toMatchObject({ status: 400, body: { error: { code: 'invalid_request', field: 'sid' } } });
    }
  });

  it('routes another letter case or a trailing slash to the same route, under the same permission', async () => {
    for (const path of [`/V1/SESSIONS/${sessionId}`, `/v1/sessions/${sessionId}/`]) {
      const read = await fetch(`${ledger.baseUrl}${path}`, { headers: { authorization: readerOnly } });
      expect({ path, status: read.status }).toEqual({ path, status: 200 });
      expect((await bodyOf(read)).id).toBe(sessionId);
    }
    // A reader may not write, whatever the path's case: the guard keys the route as declared.
    for (const path of ['/V1/SESSIONS', '/v1/Sessions/']) {
      const write = await send(path, '{"id":"by-a-reader"}', { 'content-type': 'application/json' }, readerOnly);
      expect({ path, status: write.status }).toEqual({ path, status: 403 });
    }
    expect((await ledger.request('GET', '/v1/sessions/by-a-reader')).status).toBe(404);
  });

  it('decodes a text body in its declared charset, and refuses bytes or charsets it cannot read (never U+FFFD)', async () => {
    const latin1 = (text: string) => Buffer.from(text, 'latin1');
    const lines = [
      { seq: 1, type: 'text.start' },
      { seq: 2, type: 'text.delta', text: 'café über' },
    ];
    const ndjson = latin1(lines.map((line) => JSON.stringify(line)).join('\n'));
    const decodedPath = `/v1/sessions/${sessionId}/messages/latin1/chunks`;
    const message = { id: 'latin1', role: 'assistant', parentId: 'a1' };
    expect((await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, message)).status).toBe(201);
    const read = await send(decodedPath, ndjson, { 'content-type': 'application/x-ndjson; charset=latin1' });
    expect(read.status).toBe(200);
    const recorded = (await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events;
    expect(recorded.at(-1).data).toMatchObject({ messageId: 'latin1', seq: 2 });
    expect(JSON.stringify(recorded.at(-1).data)).toContain('"café über"');

    const before = await eventCount();
    const refusals: [string, Uint8Array | string, number, string][] = [
      // JSON is Unicode: a JSON body in Latin-1 is refused, as Express refused it.
      ['application/json; charset=latin1', latin1('[{"seq":3,"type":"raw","content":"café"}]'), 415, 'content-type'],
      ['application/x-ndjson; charset=bogus', '{"seq":3,"type":"raw","content":1}', 415, 'content-type'],
      ['application/json; charset=utf-8, application/xml', '[{"seq":3,"type":"raw","content":1}]', 415, 'content-type'],
      // Bytes that are not UTF-8 are not stored as replacement characters.
      ['application/json', latin1('[{"seq":3,"type":"raw","content":"café"}]'), 400, '(body)'],
      ['application/x-ndjson', latin1('{"seq":3,"type":"raw","content":"café"}'), 400, '(body)'],
      // windows-1252's € “ ” (0x80–0x9F), which Node 20's decoder reads as control characters.
      [
        'application/x-ndjson; charset=windows-1252',
        Buffer.from([...latin1('{"seq":3,"type":"raw","content":"'), 0x80, 0x22, 0x7d]),
        400,
        '(body)',
      ],
      [
        'application/x-ndjson; charset=latin1; charset=utf-8',
        '{"seq":3,"type":"raw","content":1}',
        415,
        'content-type',
      ],
    ];
    for (const [contentType, body, status, field] of refusals) {
      const response = await send(decodedPath, body, { 'content-type': contentType });
      expect({ contentType, status: response.status, field: (await bodyOf(response)).error.field }).toEqual({
        contentType,
        status,
        field,
      });
    }
    expect(await eventCount()).toBe(before);
    const withMark = await send('/v1/sessions', '\ufeff{"id":"byte-order-mark"}', {
      'content-type': 'application/json',
    });
    expect(withMark.status).toBe(201);
  });

  it('answers a path that is not valid percent-encoding in the API shape, without echoing it', async () => {
    const response = await fetch(`${ledger.baseUrl}/v1/sessions/%E0%A4%A`, { headers: { authorization: producer } });
    expect(response.status).toBe(400);
    const text = await response.text();
    expect(JSON.parse(text)).toEqual({ error: { code: 'bad_request', message: expect.any(String), field: '(path)' } });
    expect(text).not.toContain('%E0');
  });

  it('answers bytes that are not HTTP in the API shape', async () => {
    const socket = await connect(ledger.baseUrl);
    let received = '';
    socket.on('data', (bytes: Buffer) => (received += bytes.toString('utf8')));
    socket.write('POST /v1/sessions HTTP/1.1\r\nHost: ledger\r\nContent-Length: abc\r\n\r\n{}');
    await until(() => socket.destroyed || socket.readableEnded, 10_000, 'the server to close the connection');
    expect(received).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'bad_request', message: 'the request is not valid HTTP' },
    });
  });

  it("answers a gateway route reached through a percent-encoded path in its provider's error shape", async () => {
    for (const path of ['/gateway/openai/v1/chat/completions', '/gat%65way/openai/v1/chat/completions']) {
      const response = await send(path, '{"model":', { 'content-type': 'application/json' });
      expect({ path, status: response.status, body: await response.json() }).toMatchObject({
        path,
        status: 400,
        body: { error: { type: 'invalid_request_error', code: 'malformed_json' } },
      });
    }
  });

  it('records a gateway request as sent: bytes that are not UTF-8 are refused, not recorded as U+FFFD', async () => {
    const body = Buffer.from('{"model":"m","messages":[{"role":"user","content":"caf\xe9"}]}', 'latin1');
    const response = await send('/gateway/openai/v1/chat/completions', body, { 'content-type': 'application/json' });
    expect(response.status).toBe(400);
    expect((await bodyOf(response)).error).toMatchObject({ code: 'malformed_json' });
  });

  it('answers an unknown route without echoing its target, whose query may hold a credential', async () => {
    const response = await fetch(`${ledger.baseUrl}/v1/no-such-route?access_token=secret-in-query`);
    const text = await response.text();
    expect(response.status).toBe(404);
    expect(text).not.toContain('secret-in-query');
    expect(JSON.parse(text)).toEqual({ error: { code: 'not_found', message: 'no route serves this path' } });
  });

  it("serves the Swagger UI's own files under /docs/* and nothing beside them, whatever the path's tricks", async () => {
    expect((await fetch(`${ledger.baseUrl}/docs/swagger-ui.css`)).status).toBe(200);
    const tricks = [
      '/docs/../package.json',
      '/docs/%2e%2e/%2e%2e/package.json',
      '/docs/..%2f..%2f..%2fpackage.json',
      '/docs/..%5c..%5cpackage.json',
      '/docs/%00swagger-ui.css',
      '/docs/.npmrc',
      '/docs/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd',
    ];
    for (const path of tricks) {
      const response = await fetch(`${ledger.baseUrl}${path}`);
      const text = await response.text();
      expect({ path, refused: response.status === 403 || response.status === 404 }).toEqual({ path, refused: true });
      expect(text).not.toContain('"block-ledger"');
      expect(text).not.toContain('root:');
      expect(JSON.parse(text).error.code).toMatch(/^(forbidden|not_found)$/);
    }
  });

  it('writes no refusal into a live feed already under way when bad bytes follow on its connection', async () => {
    const socket = await connect(ledger.baseUrl);
    let received = '';
    socket.on('data', (bytes: Buffer) => (received += bytes.toString('utf8')));
    socket.write(`GET /v1/sessions/${sessionId}/live HTTP/1.1\r\nHost: ledger\r\nAuthorization: ${readerOnly}\r\n\r\n`);
    await until(() => received.includes('\r\n\r\n'), 10_000, 'the live feed to start');
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    socket.write('NOT HTTP AT ALL\r\n\r\n');
    await until(() => socket.destroyed || socket.readableEnded, 10_000, 'the server to close the connection');
    expect(received.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(received).not.toContain('not valid HTTP');
  });
});
