import OpenAI from 'openai';
import type { EventLog } from '#event-log';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import { eventually, startGateway, type GatewayFixture } from '../support/gateway-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { authorization } from '../support/test-credentials.js';
import { pendingToolCalls } from '../../libs/core/src/testing/ignored-chunks.js';

/**
 * A session's quota through the API and the gateway: a full session answers 409 `session_full`
 * naming what it holds, stays readable, lets the message under way finish within its share, and
 * a full session's model call is refused before any provider is asked.
 */
describe('session quota over HTTP', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({
      env: { LEDGER_SESSION_MAX_EVENTS: '8', LEDGER_SESSION_MAX_FORK_DEPTH: '1' },
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  const request = (method: string, path: string, body?: unknown) => gateway.ledger.request(method, path, body);
  const deltas = (from: number, count: number) =>
    Array.from({ length: count }, (_, index) =>
      from + index === 1 ? { seq: 1, type: 'text.start' } : { seq: from + index, type: 'text.delta', text: 'word' },
    );
  const eventCount = async (sessionId: string) =>
    (await request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events.length;

  it('a full session refuses new messages with 409 naming its quota, stays readable, and lets the answer under way finish', async () => {
    const sessionId = (await request('POST', '/v1/sessions', { title: 'quota' })).body.id;
    expect((await request('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' })).status).toBe(
      201,
    );
    expect((await request('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, deltas(1, 6))).status).toBeLessThan(
      300,
    );
    expect(await eventCount(sessionId)).toBe(8);

    const refused = await request('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a2', role: 'assistant' });
    expect(refused).toEqual({
      status: 409,
      body: { error: { code: 'session_full', message: 'the session holds 8 events; it may hold its quota of 8' } },
    });
    expect(await eventCount(sessionId)).toBe(8);
    expect((await request('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);

    // The message under way goes on to 10 events, then it too is refused.
    const underWay = await request('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, deltas(7, 2));
    expect(underWay.status).toBeLessThan(300);
    const pastShare = await request('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, deltas(9, 1));
    expect(pastShare.status).toBe(409);
    expect(pastShare.body.error.code).toBe('session_full');
    expect(await eventCount(sessionId)).toBe(10);

    // A fork of the full session is taken, and full from its start; a fork of that fork is too deep.
    const fork = await request('POST', `/v1/sessions/${sessionId}/fork`, { atPosition: underWay.body.position });
    expect(fork.status).toBe(201);
    const forkMessage = await request('POST', `/v1/sessions/${fork.body.id}/messages`, { role: 'user', content: 'x' });
    expect([forkMessage.status, forkMessage.body.error.code]).toEqual([409, 'session_full']);
    const deeper = await request('POST', `/v1/sessions/${fork.body.id}/fork`, { atPosition: fork.body.position });
    expect(deeper).toMatchObject({
      status: 422,
      body: { error: { code: 'fork_too_deep', field: 'sourceSessionId' } },
    });
  });

  it('a model call whose conversation the session has no room to record is refused before any upstream is asked', async () => {
    const client = await gateway.openai({ sessionId: 'long-conversation' });
    const before = gateway.double.exchanges.length;
    // Twelve past turns: recorded as twelve messages and more, past the quota of 8 events.
    const messages = Array.from({ length: 12 }, (_, turn) => ({
      role: turn % 2 === 0 ? ('user' as const) : ('assistant' as const),
      content: `turn ${turn}`,
    }));
    const refusal = await client.chat.completions
      .create({ model: 'gpt-double', messages: [...messages, { role: 'user', content: 'and now?' }] })
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(OpenAI.ConflictError);
    expect((refusal as InstanceType<typeof OpenAI.ConflictError>).error).toMatchObject({ code: 'session_full' });
    expect((refusal as Error).message).toMatch(/this would take the session from 1 to \d+ events, past its quota of 8/);
    expect(gateway.double.exchanges.length).toBe(before);
    expect(await eventCount('long-conversation')).toBe(1);
  });

  it('a full session’s model call is refused in the provider’s shape before any upstream is asked', async () => {
    gateway.double.script(() => ({ text: 'Yes.' }));
    const client = await gateway.openai({ sessionId: 'gateway-quota' });
    const ask = () =>
      client.chat.completions.create({ model: 'gpt-double', messages: [{ role: 'user', content: 'Hi' }] });
    // Each call records its request and answer: within a few calls the session holds its 8 events.
    let refusal: unknown;
    let answered = 0;
    for (let call = 0; call < 8 && refusal === undefined; call += 1) {
      const before = gateway.double.exchanges.length;
      await ask().then(
        () => (answered += 1),
        (error: unknown) => {
          refusal = error;
          expect(gateway.double.exchanges.length).toBe(before);
        },
      );
    }
    expect(answered).toBeGreaterThan(0);
    expect(refusal).toBeInstanceOf(OpenAI.ConflictError);
    expect((refusal as InstanceType<typeof OpenAI.ConflictError>).error).toMatchObject({ code: 'session_full' });
    expect(await eventCount('gateway-quota')).toBeGreaterThanOrEqual(8);
  });
});

describe('session quota through the gateway, answers in flight', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    // No wait for records at the end of an answer: a call must still wait for its request's record before it is relayed.
    gateway = await startGateway({
      env: {
        LEDGER_SESSION_MAX_EVENTS: '40',
        LEDGER_GATEWAY_RECORD_BATCH_MS: '10',
        LEDGER_GATEWAY_RECORD_WAIT_MS: '0',
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  /** The session's events; none while it does not exist (404). */
  const storedEvents = async (sessionId: string) => {
    const { body } = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`);
    return (body.events ?? []) as { type: string; position: number; data: { role?: string } }[];
  };

  it('calls in parallel past the pre-call check: every answer relayed is recorded, the others are refused', async () => {
    const client = await gateway.openai({ sessionId: 'parallel-quota' });
    const ask = (content: string) =>
      client.chat.completions.create({ model: 'gpt-double', messages: [{ role: 'user', content }] });
    gateway.double.script(() => ({ text: 'Yes.' }));
    // Calls one after the other until the session is a few events short of its quota of 40.
    let fulfilled = 0;
    while ((await storedEvents('parallel-quota')).length < 30) {
      await ask(`call ${fulfilled}`);
      fulfilled += 1;
    }
    // Each answer's first byte waits, so all six are past the check before any is recorded.
    gateway.double.script(() => ({ text: 'Yes.', firstByteDelayMs: 300 }));
    const upstreamBefore = gateway.double.exchanges.length;
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, (_, call) => ask(`parallel ${call}`)));
    expect(gateway.double.exchanges.length - upstreamBefore).toBe(6);
    const refused = outcomes.filter((outcome) => outcome.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    for (const { reason } of refused) {
      expect(reason).toBeInstanceOf(OpenAI.ConflictError);
      expect((reason as InstanceType<typeof OpenAI.ConflictError>).error).toMatchObject({ code: 'session_full' });
    }
    const answers = (await storedEvents('parallel-quota')).filter(
      (event) => event.type === 'message.created' && event.data.role === 'assistant',
    );
    expect(answers).toHaveLength(fulfilled + outcomes.length - refused.length);
  });

  it('an answer streaming past the share ends marked as cut off, not left under way', async () => {
    gateway.double.script(() => ({ text: 'w '.repeat(400), chunkChars: 2 }));
    const client = await gateway.openai({ sessionId: 'stream-past-share' });
    const stream = await client.chat.completions.create({
      model: 'gpt-double',
      stream: true,
      messages: [{ role: 'user', content: 'talk' }],
    });
    let received = 0;
    for await (const _chunk of stream) received += 1;
    // The client got the whole answer; the session holds as much as its share allowed, then how it ended.
    expect(received).toBeGreaterThan(100);
    // The answer's end is recorded after the client's stream ended (no record wait here).
    const events = await eventually(
      () => storedEvents('stream-past-share'),
      (stored) => stored.at(-1)?.type === 'chunk.error',
    );
    expect(events.length).toBeLessThanOrEqual(51);
    const view = await gateway.ledger.request(
      'GET',
      `/v1/sessions/stream-past-share?minPosition=${events.at(-1)!.position}`,
    );
    const answer = view.body.messages.at(-1);
    expect(answer.status).toBe('error');
    expect(JSON.stringify(answer.blocks)).toContain('RecordingGap');
  });
});

describe("a session's memory, and a fork's reads of its source", () => {
  const memory = 8 * 1024 * 1024;
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_SESSION_MAX_MEMORY: String(memory) });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('a session of small tool calls is full by the memory its fold holds, long before its bytes, and stores nothing refused', async () => {
    const request = (method: string, path: string, body?: unknown) => ledger.request(method, path, body);
    const sessionId = (await request('POST', '/v1/sessions', { title: 'calls' })).body.id;
    const post = async (message: number) => {
      const created = await request('POST', `/v1/sessions/${sessionId}/messages`, {
        id: `a${message}`,
        role: 'assistant',
      });
      if (created.status !== 201) return created;
      return request('POST', `/v1/sessions/${sessionId}/messages/a${message}/chunks`, [
        { seq: 1, type: 'mcp_tool_pending', responses: pendingToolCalls(5_000) },
      ]);
    };
    let refused: Awaited<ReturnType<typeof post>> | undefined;
    let message = 0;
    for (; message < 20 && refused === undefined; message += 1) {
      const outcome = await post(message);
      if (outcome.status === 409) refused = outcome;
      else expect(outcome.status).toBe(200);
    }
    expect(refused?.body.error).toMatchObject({ code: 'session_full' });
    expect(refused!.body.error.message).toMatch(
      new RegExp(`^the session holds \\d+ bytes of memory when folded; it may hold its quota of ${memory}$`),
    );
    const events = await request('GET', `/v1/sessions/${sessionId}/events?limit=1000`);
    const stored = JSON.stringify(events.body.events).length;
    // Its events' data is a small part of the 128 MiB byte quota and of the memory quota.
    expect(stored).toBeLessThan(memory / 4);
    expect((await post(message)).status).toBe(409);
    expect((await request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events).toHaveLength(
      events.body.events.length,
    );
    expect((await request('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
  });

  it('a fork at the start of a 12,000-event source reads one page of it, not the whole source', async () => {
    const source = await ledger.request('POST', '/v1/sessions', { title: 'long source' });
    expect(
      (await ledger.request('POST', `/v1/sessions/${source.body.id}/messages`, { id: 'a1', role: 'assistant' })).status,
    ).toBe(201);
    for (let from = 1; from < 12_000; from += 1_000) {
      const chunks = Array.from({ length: 1_000 }, (_, index) =>
        from + index === 1 ? { seq: 1, type: 'text.start' } : { seq: from + index, type: 'text.delta', text: 'w' },
      );
      expect((await ledger.request('POST', `/v1/sessions/${source.body.id}/messages/a1/chunks`, chunks)).status).toBe(
        200,
      );
    }
    const fork = await ledger.request('POST', `/v1/sessions/${source.body.id}/fork`, {
      atPosition: source.body.position,
    });
    expect(fork.status).toBe(201);

    // Every event the log hands out while the fork is verified and exported.
    const log: EventLog = ledger.app.get(EVENT_LOG);
    const readStream = log.readStream.bind(log);
    let handedOut = 0;
    log.readStream = async (...args) => {
      const events = await readStream(...args);
      handedOut += events.length;
      return events;
    };
    try {
      const verified = await ledger.request(
        'GET',
        `/v1/sessions/${fork.body.id}/verify`,
        undefined,
        undefined,
        'auditor',
      );
      expect(verified.body).toMatchObject({ ok: true, checkedEvents: 2 });
      const exported = await fetch(`${ledger.baseUrl}/v1/sessions/${fork.body.id}/export`, {
        headers: await authorization(ledger.baseUrl, 'auditor'),
      });
      expect(exported.status).toBe(200);
      await exported.text();
    } finally {
      log.readStream = readStream;
    }
    // Each of the two reads takes the fork's event and one page of the source (5,000 events).
    expect(handedOut).toBeLessThanOrEqual(2 * (1 + 5_000));
  });
});
