import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import pg from 'pg';
import { eventually, startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

/**
 * What the gateway refuses, and how answers that end badly are recorded: errors reach the SDK in
 * its provider's shape, a call no model answered leaves nothing in a session, a client that leaves
 * pauses its message, a provider that fails mid-answer fails it, and no upstream key is ever seen.
 */
const MODEL = 'gpt-double';

describe('gateway: refusals and bad endings', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ openAiModels: [MODEL] });
  });
  afterEach(() => gateway.double.resetScripts());
  afterAll(async () => {
    await gateway?.close();
  });

  const ask = (client: OpenAI, content = 'Hello?') =>
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] });
  const exchangesNow = () => gateway.double.exchanges.length;
  const post = async (body: string, headers: Record<string, string> = {}) => {
    const key = await gateway.ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    const response = await fetch(`${gateway.ledger.baseUrl}/gateway/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body,
    });
    return { status: response.status, body: (await response.json()) as { error: Record<string, unknown> } };
  };

  it('a wrong or missing ledger key is the SDK authentication error, and no provider is asked', async () => {
    const before = exchangesNow();
    const client = await gateway.openai({ apiKey: 'blk_0000000000000000_not-a-real-secret-aaaaaaaaaaaaaaaa' });
    const error = await ask(client).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).error).toMatchObject({
      type: 'authentication_error',
    });
    const reader = await gateway.openai({
      apiKey: await gateway.ledger.credentials.key('only-reader', { roles: ['reader'] }),
    });
    await expect(ask(reader)).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(exchangesNow()).toBe(before);
  });

  it('an unknown model, a malformed body and a conversation that does not hold together are 400/404 naming the field', async () => {
    const before = exchangesNow();
    const client = await gateway.openai();
    const unknownModel = await client.chat.completions
      .create({ model: 'gpt-elsewhere', messages: [{ role: 'user', content: 'x' }] })
      .catch((caught: unknown) => caught);
    expect(unknownModel).toBeInstanceOf(OpenAI.NotFoundError);
    expect((unknownModel as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'model_not_found',
      param: 'model',
    });

    expect(await post('{"model": ')).toMatchObject({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'malformed_json' } },
    });
    expect(await post(JSON.stringify({ model: MODEL }))).toMatchObject({
      status: 400,
      body: { error: { param: 'messages' } },
    });
    const orphanResult = {
      model: MODEL,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'tool', tool_call_id: 'call_nowhere', content: '1' },
      ],
    };
    expect(await post(JSON.stringify(orphanResult))).toMatchObject({
      status: 400,
      body: { error: { param: 'messages[1]' } },
    });
    const badSession = await post(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }), {
      'x-ledger-session': 'acme/other',
    });
    expect(badSession).toMatchObject({ status: 400, body: { error: { param: 'X-Ledger-Session' } } });
    expect(exchangesNow()).toBe(before);
  });

  it("a producer cannot record into another producer's session through the gateway", async () => {
    const sessionId = `owned-${randomUUID()}`;
    gateway.double.script({ text: 'Mine.' });
    await ask(await gateway.openai({ sessionId, who: 'owner' }));
    const before = exchangesNow();
    const intruder = await gateway.openai({ sessionId, who: 'intruder' });
    await expect(ask(intruder, 'Let me in')).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(exchangesNow()).toBe(before);
    // The gateway's records are not the owner's writes (no read-your-writes): wait for the read models to hold them.
    const tree = await eventually(
      () => gateway.ledger.request('GET', `/v1/sessions/${sessionId}/tree`, undefined, undefined, 'owner'),
      (read) => (read.body?.messages?.length ?? 0) >= 2,
    );
    expect(tree.body.messages).toHaveLength(2);
  });

  it("a provider's refusal reaches the client as the provider sent it and records no message", async () => {
    const sessionId = `refused-${randomUUID()}`;
    gateway.double.script({ status: 400, message: 'the prompt is too long for this double' });
    const client = await gateway.openai({ sessionId });
    const error = (await ask(client).catch((caught: unknown) => caught)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.message).toContain('the prompt is too long for this double');
    // The session the header names was opened before the provider was asked; the call left nothing in it.
    // Read from the log itself: the read models may not have caught up with the opening yet.
    const recorded = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/events`);
    expect(recorded.body.events.map((event: { type: string }) => event.type)).toEqual(['session.opened']);
  });

  it('a provider that fails mid-answer fails the message, with the text it had sent', async () => {
    const sessionId = `failing-${randomUUID()}`;
    gateway.double.script({
      text: 'The first part arrives, then',
      chunkChars: 5,
      failAfterChunks: 4,
      errorMessage: 'the double broke off',
    });
    const client = await gateway.openai({ sessionId });
    const { data: stream, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Go' }], stream: true })
      .withResponse();
    const messageId = response.headers.get('x-ledger-message')!;
    await expect(
      (async () => {
        for await (const chunk of stream) void chunk;
      })(),
    ).rejects.toThrow('the double broke off');
    const read = () =>
      gateway.ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`).then((answer) => answer.body);
    const message = await eventually(read, (body) => body?.status === 'error');
    expect(message.status).toBe('error');
    expect(message.blocks.find((block: { type: string }) => block.type === 'error').error.message).toContain(
      'the double broke off',
    );
  });

  it('a client that leaves mid-answer aborts the provider call and pauses the message with what had arrived', async () => {
    const sessionId = `leaving-${randomUUID()}`;
    gateway.double.script({
      text: 'A long answer that the client will not wait for, streamed slowly.',
      chunkChars: 4,
      chunkDelayMs: 40,
    });
    const client = await gateway.openai({ sessionId });
    const abort = new AbortController();
    const { data: stream, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Talk' }], stream: true }, { signal: abort.signal })
      .withResponse();
    let received = '';
    for await (const chunk of stream) {
      received += chunk.choices[0]?.delta?.content ?? '';
      if (received.length >= 8) {
        abort.abort();
        break;
      }
    }
    const messageId = response.headers.get('x-ledger-message')!;
    const read = () =>
      gateway.ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`).then((answer) => answer.body);
    const message = await eventually(read, (body) => body?.status === 'paused');
    expect(message.status).toBe('paused');
    const text = message.blocks.find((block: { type: string }) => block.type === 'main_text');
    expect(text.content.startsWith(received.slice(0, 8))).toBe(true);
    expect(text.content.length).toBeLessThan(
      'A long answer that the client will not wait for, streamed slowly.'.length,
    );
    await gateway.double.settled();
    expect(gateway.double.exchanges.at(-1)!.aborted).toBe(true);
  });

  it('when the log cannot take the call, it is refused with 503 before any provider is asked', async () => {
    const name = new URL(gateway.ledger.database.connectionString).pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.LEDGER_TEST_DATABASE_URL });
    await admin.connect();
    const before = exchangesNow();
    const client = await gateway.openai({ sessionId: `down-${randomUUID()}` });
    try {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [name],
      );
      const error = await ask(client).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(OpenAI.InternalServerError);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
      expect(exchangesNow()).toBe(before);
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    gateway.double.script({ text: 'Back.' });
    const back = await eventually(
      async () => ask(await gateway.openai({ sessionId: `up-${randomUUID()}` })).catch(() => undefined),
      (answer) => answer !== undefined,
    );
    expect(back).toBeDefined();
  });

  describe('every gateway route', () => {
    const ROUTES = [
      {
        path: '/gateway/openai/v1/chat/completions',
        body: { model: MODEL, messages: [{ role: 'user', content: 'x' }] },
      },
      { path: '/gateway/openai/v1/responses', body: { model: MODEL, input: 'x' } },
      {
        path: '/gateway/anthropic/v1/messages',
        body: { model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'x' }] },
      },
    ];
    const call = async (path: string, body: string, headers: Record<string, string>) => {
      const response = await fetch(`${gateway.ledger.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      return { status: response.status, body: (await response.json()) as Record<string, any> };
    };
    /** The field a refusal names: OpenAI's `param`, or the field our message starts with in Anthropic's shape. */
    const fieldOf = (answer: { body: Record<string, any> }) => answer.body.error?.param ?? answer.body.error?.message;

    it.each(ROUTES)(
      '$path: no credential 401, a role other than producer 403, bad input 400 naming the field',
      async (route) => {
        const before = exchangesNow();
        const bearer = async (who: string, roles: string[]) => ({
          authorization: `Bearer ${await gateway.ledger.credentials.key(who, { roles: roles })}`,
        });
        expect((await call(route.path, JSON.stringify(route.body), {})).status).toBe(401);
        for (const role of ['reader', 'reviewer', 'auditor', 'admin']) {
          expect(
            (await call(route.path, JSON.stringify(route.body), await bearer(`only-${role}`, [role]))).status,
          ).toBe(403);
        }
        const producer = await bearer('agent', ['producer', 'reader']);
        const malformed = await call(route.path, '{"model": ', producer);
        expect(malformed.status).toBe(400);
        const { model: _model, ...withoutModel } = route.body;
        const noModel = await call(route.path, JSON.stringify(withoutModel), producer);
        expect(noModel.status).toBe(400);
        expect(fieldOf(noModel)).toContain('model');
        const badSession = await call(route.path, JSON.stringify(route.body), {
          ...producer,
          'x-ledger-session': '../other',
        });
        expect(badSession.status).toBe(400);
        expect(fieldOf(badSession)).toContain('X-Ledger-Session');
        expect(exchangesNow()).toBe(before);
      },
    );

    it("another tenant's producer naming the same session records into a session of its own tenant", async () => {
      const sessionId = `shared-name-${randomUUID()}`;
      gateway.double.script([{ text: 'For acme.' }, { text: 'For globex.' }]);
      const acme = await gateway.ledger.credentials.key('acme-agent', {
        roles: ['producer', 'reader'],
        tenant: 'acme',
      });
      const globex = await gateway.ledger.credentials.key('globex-agent', {
        roles: ['producer', 'reader'],
        tenant: 'globex',
      });
      await ask(await gateway.openai({ sessionId, apiKey: acme }), 'acme question');
      await ask(await gateway.openai({ sessionId, apiKey: globex }), 'globex question');
      // The read models follow the log (and an earlier test stopped the database for a while).
      const historyOf = async (who: string) => {
        const read = () =>
          gateway.ledger.request('GET', `/v1/sessions/${sessionId}/history?format=openai`, undefined, undefined, who);
        const answer = await eventually(read, (response) => response.body?.messages?.length === 2);
        return (answer.body.messages as { content: string }[]).map((message) => message.content);
      };
      expect(await historyOf('acme-agent')).toEqual(['acme question', 'For acme.']);
      expect(await historyOf('globex-agent')).toEqual(['globex question', 'For globex.']);
    });
  });
});
