import { randomUUID } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { eventually } from '../support/gateway-fixture.js';
import type { LedgerUnderTest } from '../support/ledger-http.js';
import { startLedgerWithUpstream } from '../support/own-upstream.js';

/**
 * A hostile or broken provider (or a proxy before it), answering in raw bytes what no well-behaved provider would
 * (an attack review, round 36): the client must not get what the record does not hold, nor the upstream key, nor
 * wait for ever.
 */
const UPSTREAM_KEY = 'sk-upstream-hostile-0123456789';
const REAL = 'REAL: wire the money';
const FAKE = 'FAKE: the weather is nice';

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const completion = (content: string) =>
  JSON.stringify({
    id: 'c1',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  });

function answer(status: string, headers: Record<string, string>, body: Buffer | string): Buffer {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const head = Object.entries({ ...headers, 'content-length': String(bytes.length), connection: 'close' })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return Buffer.concat([Buffer.from(`HTTP/1.1 ${status}\r\n${head}\r\n`), bytes]);
}

/** What the provider sends, by the request's model. */
const SCENARIOS: Record<string, () => Buffer> = {
  // A gzip body against `accept-encoding: identity`, with a fake stream in the header's comment (FCOMMENT), which
  // decompressors skip: the client's fetch decodes the real stream, a reader of the raw bytes would see the fake one.
  gzip: () => {
    const compressed = gzipSync(chunk(REAL) + 'data: [DONE]\n\n');
    const comment = Buffer.from(`\n\n${chunk(FAKE)}data: [DONE]\n\n\0`);
    const header = Buffer.from(compressed.subarray(0, 10));
    header[3] |= 0x10;
    const forged = Buffer.concat([header, comment, compressed.subarray(10)]);
    return answer('200 OK', { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }, forged);
  },
  switching: () => Buffer.from('HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n'),
  'bad-status': () => answer('099 Odd', { 'content-type': 'application/json' }, completion('odd')),
  'echoes-key-stream': () =>
    answer(
      '200 OK',
      { 'content-type': 'text/event-stream', 'x-request-id': UPSTREAM_KEY },
      chunk(`your key is ${UPSTREAM_KEY}`) + 'data: [DONE]\n\n',
    ),
  'echoes-key-whole': () =>
    answer('200 OK', { 'content-type': 'application/json' }, completion(`key ${JSON.stringify(UPSTREAM_KEY)}`)),
  'bom-whole': () => answer('200 OK', { 'content-type': 'application/json' }, `\uFEFF${completion('with a mark')}`),
  'text-whole': () => answer('200 OK', { 'content-type': 'text/plain' }, completion('as text')),
  // OpenAI's SDK raises any event named `error`, whatever its data: here a chunk, which read as one would be text.
  // Headers and part of the body, then a reset (`broken-off`, below).
  'broken-off': () =>
    Buffer.from('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"id":"c1",'),
  'error-event': () =>
    answer('200 OK', { 'content-type': 'text/event-stream' }, `${chunk('Seen. ')}event: error\n${chunk(FAKE)}`),
};

/** A provider speaking raw HTTP/1.1: it reads the request's body for the model and sends that scenario's bytes. */
async function startRawProvider(): Promise<{ baseUrl: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let received = Buffer.alloc(0);
    socket.on('data', (data) => {
      received = Buffer.concat([received, data]);
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(received.subarray(0, headEnd).toString())?.[1] ?? 0);
      if (received.length < headEnd + 4 + length) return;
      const { model } = JSON.parse(received.subarray(headEnd + 4, headEnd + 4 + length).toString()) as {
        model: string;
      };
      if (model !== 'broken-off') return void socket.end(SCENARIOS[model]());
      socket.write(SCENARIOS[model](), () => setTimeout(() => socket.resetAndDestroy(), 50));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('gateway: a hostile or broken provider', () => {
  let ledger: LedgerUnderTest;
  let provider: Awaited<ReturnType<typeof startRawProvider>>;
  let apiKey: string;

  beforeAll(async () => {
    provider = await startRawProvider();
    ledger = await startLedgerWithUpstream({ protocol: 'openai', baseUrl: provider.baseUrl, key: UPSTREAM_KEY });
    apiKey = await ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
  });

  const clientFor = (sessionId: string) =>
    new OpenAI({
      baseURL: `${ledger.baseUrl}/gateway/openai/v1`,
      apiKey,
      maxRetries: 0,
      timeout: 15_000,
      defaultHeaders: { 'X-Ledger-Session': sessionId },
    });
  const ask = { messages: [{ role: 'user' as const, content: 'hi' }] };
  /** The session's answer message, once the record says how it ended. */
  const answerMessage = (sessionId: string, messageId: string) =>
    eventually(
      () => ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`).then((read) => read.body),
      (body) => body?.status !== undefined && body.status !== 'processing',
    );

  it('a success quoting the upstream key reaches neither the client nor the record with it', async () => {
    const sessionId = `echo-${randomUUID()}`;
    const client = clientFor(sessionId);
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'echoes-key-stream', ...ask, stream: true })
      .withResponse();
    let received = '';
    for await (const part of stream) received += part.choices[0]?.delta.content ?? '';
    expect(received).toBe(`your key is ${'*'.repeat(UPSTREAM_KEY.length)}`);
    expect(response.headers.get('x-request-id')).toBe('*'.repeat(UPSTREAM_KEY.length));
    const whole = await client.chat.completions.create({ model: 'echoes-key-whole', ...ask });
    expect(whole.choices[0].message.content).toBe(`key "${'*'.repeat(UPSTREAM_KEY.length)}"`);
    const message = await answerMessage(sessionId, response.headers.get('x-ledger-message')!);
    expect(message.status).toBe('success');
    const history = await ledger.request('GET', `/v1/sessions/${sessionId}/history?format=openai`);
    expect(JSON.stringify(history.body)).not.toContain(UPSTREAM_KEY);
  });

  it('a whole answer is recorded as the SDK reads it: JSON after a byte order mark, and text as a gap', async () => {
    const sessionId = `whole-${randomUUID()}`;
    const client = clientFor(sessionId);
    const { data: marked, response } = await client.chat.completions
      .create({ model: 'bom-whole', ...ask })
      .withResponse();
    expect(marked.choices[0].message.content).toBe('with a mark');
    const recorded = await answerMessage(sessionId, response.headers.get('x-ledger-message')!);
    expect(recorded.blocks.find((block: { type: string }) => block.type === 'main_text')?.content).toBe('with a mark');
    const { data: text, response: textResponse } = await client.chat.completions
      .create({ model: 'text-whole', messages: [{ role: 'user', content: 'again' }] })
      .withResponse();
    // The SDK hands its caller the body as a string: no answer the record can hold, so the message says so.
    expect(typeof text).toBe('string');
    const gap = await answerMessage(sessionId, textResponse.headers.get('x-ledger-message')!);
    expect(gap.status).toBe('error');
    expect(JSON.stringify(gap.blocks)).toContain('RecordingGap');
  });

  it('an error event the SDK raises ends the record there, as the error it raised', async () => {
    const sessionId = `error-event-${randomUUID()}`;
    const { data: stream, response } = await clientFor(sessionId)
      .chat.completions.create({ model: 'error-event', ...ask, stream: true })
      .withResponse();
    let received = '';
    const raised = await (async () => {
      for await (const part of stream) received += part.choices[0]?.delta.content ?? '';
    })().catch((error: unknown) => error);
    expect(raised).toBeInstanceOf(OpenAI.APIError);
    expect(received).toBe('Seen. ');
    const message = await answerMessage(sessionId, response.headers.get('x-ledger-message')!);
    expect(message.status).toBe('error');
    expect(message.blocks.find((block: { type: string }) => block.type === 'main_text')?.content).toBe('Seen. ');
    expect(JSON.stringify(message.blocks)).toContain('ProviderError');
    expect(JSON.stringify(message)).not.toContain('FAKE');
  });

  it('an answer broken off mid-body is 502 upstream_unavailable, not a database failure nor a 500', async () => {
    const failure = await clientFor(`broken-off-${randomUUID()}`)
      .chat.completions.create({ model: 'broken-off', ...ask })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 502, error: { code: 'upstream_unavailable' } });
  });

  // Last: each of these counts against the one key's health (three such failures in a minute cool it).
  it('a success compressed against accept-encoding: identity is no answer: 502, and no fake text recorded', async () => {
    const sessionId = `gzip-${randomUUID()}`;
    const failure = await clientFor(sessionId)
      .chat.completions.create({ model: 'gzip', ...ask, stream: true })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 502 });
    const session = await ledger.request('GET', `/v1/sessions/${sessionId}/history?format=openai`);
    expect(JSON.stringify(session.body)).not.toContain('FAKE');
  });

  it('a 101 answer ends the call with 502 rather than leaving it waiting', async () => {
    const failure = await clientFor(`switching-${randomUUID()}`)
      .chat.completions.create({ model: 'switching', ...ask })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 502 });
  });

  it('a status no client can be given is 502, not an empty success', async () => {
    const failure = await clientFor(`bad-status-${randomUUID()}`)
      .chat.completions.create({ model: 'bad-status', ...ask })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 502 });
  });
});
