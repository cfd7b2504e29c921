import { DIALECT_NAMES, type DialectName } from '../../libs/core/src/index.js';
import { compareBlocks } from '../../libs/core/src/testing/block-vectors.js';
import {
  DIALECT_REFUSALS,
  DIALECT_STREAMS,
  OPENAI_RESPONSES_ROUNDS,
} from '../../libs/core/src/testing/dialect-streams.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

describe('producer dialects on the chunk route', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger.close();
  });

  async function assistantMessage(): Promise<{ sessionId: string; messageId: string; route: string }> {
    const session = await ledger.request('POST', '/v1/sessions', { title: 'dialects' });
    const user = await ledger.request('POST', `/v1/sessions/${session.body.id}/messages`, {
      role: 'user',
      content: 'hi',
    });
    const assistant = await ledger.request('POST', `/v1/sessions/${session.body.id}/messages`, {
      role: 'assistant',
      model: 'm',
    });
    expect([session.status, user.status, assistant.status]).toEqual([201, 201, 201]);
    return {
      sessionId: session.body.id,
      messageId: assistant.body.id,
      route: `/v1/sessions/${session.body.id}/messages/${assistant.body.id}/chunks`,
    };
  }

  const ndjson = (events: readonly unknown[]) =>
    events.map((event) => (event === '[DONE]' ? '[DONE]' : JSON.stringify(event))).join('\n');
  const cases = DIALECT_NAMES.flatMap((dialect) => DIALECT_STREAMS[dialect].map((stream) => ({ dialect, ...stream })));

  it.each(cases)(
    '$dialect, $name: posted in two requests (JSON, then NDJSON) and retried, reads back as the blocks',
    async ({ dialect, events, expected }) => {
      const { sessionId, messageId, route } = await assistantMessage();
      const half = Math.ceil(events.length / 2);
      const first = await ledger.request('POST', `${route}?dialect=${dialect}&seq=1`, events.slice(0, half));
      expect(first).toMatchObject({ status: 200, body: { duplicates: 0 } });
      expect(first.body.appended).toBeGreaterThanOrEqual(half);
      const second = await ledger.request(
        'POST',
        `${route}?dialect=${dialect}&seq=${half + 1}`,
        ndjson(events.slice(half)),
        'application/x-ndjson',
      );
      expect(second).toMatchObject({ status: 200, body: { duplicates: 0 } });
      const retry = await ledger.request('POST', `${route}?dialect=${dialect}&seq=1`, events);
      expect(retry).toMatchObject({
        status: 200,
        body: { appended: 0, duplicates: events.length, position: second.body.position },
      });

      const message = await ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${second.body.position}`,
      );
      expect(message.status).toBe(200);
      expect(message.body.status).toBe(expected.messageStatus);
      const [actual, wanted] = compareBlocks(message.body.blocks, expected.blocks);
      expect(actual).toEqual(wanted);
      // The read models and a fold of the log (which rebuilds the translators) agree exactly.
      const session = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${second.body.position}`);
      const folded = await ledger.request('GET', `/v1/sessions/${sessionId}?at=${second.body.position}`);
      expect(session.body.messages).toEqual(folded.body.messages);
    },
  );

  const refusals = DIALECT_NAMES.flatMap((dialect) =>
    DIALECT_REFUSALS[dialect].map((refusal) => ({ dialect, ...refusal })),
  );

  it.each(refusals)(
    '$dialect refuses $name: 400 naming $field, nothing appended',
    async ({ dialect, events, field }) => {
      const { sessionId, route } = await assistantMessage();
      const before = await ledger.request('GET', `/v1/sessions/${sessionId}/events`);
      const refused = await ledger.request('POST', `${route}?dialect=${dialect}&seq=1`, events);
      expect(refused).toMatchObject({ status: 400, body: { error: { code: 'invalid_event', field } } });
      expect(refused.body.error.message).toMatch(new RegExp(`^${field.replace(/[[\].]/g, '\\$&')}: `));
      const after = await ledger.request('GET', `/v1/sessions/${sessionId}/events`);
      expect(after.body.events).toEqual(before.body.events);
    },
  );

  it('records a message round by round: a tool round leaves it open, the next call completes it', async () => {
    const { sessionId, messageId, route } = await assistantMessage();
    const [toolRound, answer] = OPENAI_RESPONSES_ROUNDS;
    const messageAt = async (position: string) => {
      const path = `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`;
      const read = await ledger.request('GET', path);
      expect(read.status).toBe(200);
      return read.body;
    };

    const first = await ledger.request('POST', `${route}?dialect=openai-responses&seq=1`, toolRound.events);
    expect(first).toMatchObject({ status: 200, body: { duplicates: 0 } });
    const open = await messageAt(first.body.position);
    expect(open.status).toBe('processing');
    const [openBlocks, openWanted] = compareBlocks(open.blocks, toolRound.expected.blocks);
    expect(openBlocks).toEqual(openWanted);
    const log = await ledger.request('GET', `/v1/sessions/${sessionId}/events`);
    const chunkTypes = log.body.events
      .map((event: { type: string }) => event.type)
      .filter((type: string) => type.startsWith('chunk.'));
    expect(chunkTypes.at(-1)).toBe('chunk.llm_response_complete');

    const next = toolRound.events.length + 1;
    const second = await ledger.request('POST', `${route}?dialect=openai-responses&seq=${next}`, answer.events);
    expect(second).toMatchObject({ status: 200, body: { duplicates: 0 } });
    const done = await messageAt(second.body.position);
    expect(done.status).toBe('success');
    const settled = toolRound.expected.blocks.map((block) => ({ ...block, status: 'success' }));
    const [actual, wanted] = compareBlocks(done.blocks, [...settled, ...answer.expected.blocks]);
    expect(actual).toEqual(wanted);
  });

  it('refuses a number JSON cannot hold again (1e400 parses as Infinity) with a 400, not a failure to hash it', async () => {
    const { route } = await assistantMessage();
    const [first] = DIALECT_STREAMS.openai[0].events;
    const body = `[${JSON.stringify(first)}, {"object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 1e400}}]`;
    const refused = await ledger.request('POST', `${route}?dialect=openai&seq=1`, body);
    expect(refused).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_event', field: 'events[1].usage.total_tokens' } },
    });
  });

  it('refuses an unknown dialect, a missing or malformed seq, a gap, and mixing dialects on one message', async () => {
    const { route } = await assistantMessage();
    const [start] = DIALECT_STREAMS.anthropic[0].events;
    const unknown = await ledger.request('POST', `${route}?dialect=gemini&seq=1`, [start]);
    expect(unknown).toMatchObject({ status: 400, body: { error: { code: 'unsupported_dialect', field: 'dialect' } } });
    // A name no dialect could have is refused without being echoed back whole.
    const long = await ledger.request('POST', `${route}?dialect=${'x'.repeat(10_000)}&seq=1`, [start]);
    expect(long).toMatchObject({ status: 400, body: { error: { field: 'dialect' } } });
    expect(JSON.stringify(long.body).length).toBeLessThan(1_000);
    const noSeq = await ledger.request('POST', `${route}?dialect=anthropic`, [start]);
    expect(noSeq).toMatchObject({ status: 400, body: { error: { field: 'seq' } } });
    for (const seq of ['0', '-1', '1.5', 'one']) {
      const bad = await ledger.request('POST', `${route}?dialect=anthropic&seq=${seq}`, [start]);
      expect(bad).toMatchObject({ status: 400, body: { error: { field: 'seq' } } });
    }
    const gap = await ledger.request('POST', `${route}?dialect=anthropic&seq=2`, [start]);
    expect(gap).toMatchObject({ status: 409, body: { error: { code: 'seq_gap', field: 'seq' } } });

    const recorded = await ledger.request('POST', `${route}?dialect=anthropic&seq=1`, [start]);
    expect(recorded.status).toBe(200);
    const changed = await ledger.request('POST', `${route}?dialect=anthropic&seq=1`, [{ type: 'ping' }]);
    expect(changed).toMatchObject({ status: 409, body: { error: { code: 'seq_conflict', field: 'events[0]' } } });
    const cherry = await ledger.request('POST', route, [{ seq: 2, type: 'text.start' }]);
    expect(cherry).toMatchObject({ status: 409, body: { error: { code: 'dialect_conflict', field: 'dialect' } } });
    const other: DialectName = 'openai';
    const mixed = await ledger.request('POST', `${route}?dialect=${other}&seq=2`, ['[DONE]']);
    expect(mixed).toMatchObject({ status: 409, body: { error: { code: 'dialect_conflict', field: 'dialect' } } });
  });

  it('shows each chunk event with the provider event it came from', async () => {
    const { sessionId, route } = await assistantMessage();
    const events = DIALECT_STREAMS['ai-sdk'][0].events;
    const posted = await ledger.request('POST', `${route}?dialect=ai-sdk&seq=1`, events.slice(0, 3));
    expect(posted.status).toBe(200);
    const log = await ledger.request('GET', `/v1/sessions/${sessionId}/events`);
    const chunks = log.body.events.filter((event: { type: string }) => event.type.startsWith('chunk.'));
    expect(chunks.map((event: { type: string; data: { source: unknown } }) => [event.type, event.data.source])).toEqual(
      [
        ['chunk.llm_response_created', { dialect: 'ai-sdk', seq: 1, event: events[0] }],
        ['chunk.raw', { dialect: 'ai-sdk', seq: 2, event: events[1] }],
        ['chunk.text.start', { dialect: 'ai-sdk', seq: 3, event: events[2] }],
      ],
    );
  });
});
