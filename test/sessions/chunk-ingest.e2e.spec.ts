import { compareBlocks, loadBlockVectors, numberedChunks } from '../../libs/core/src/testing/block-vectors.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

describe('chunk ingest over HTTP', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger.close();
  });

  async function assistantMessage(): Promise<{ sessionId: string; messageId: string }> {
    const session = await ledger.request('POST', '/v1/sessions', { title: 'vectors' });
    expect(session.status).toBe(201);
    const user = await ledger.request('POST', `/v1/sessions/${session.body.id}/messages`, {
      role: 'user',
      content: 'hi',
    });
    expect(user).toMatchObject({ status: 201, body: { parentId: null } });
    const assistant = await ledger.request('POST', `/v1/sessions/${session.body.id}/messages`, {
      role: 'assistant',
      model: 'test-model',
    });
    expect(assistant).toMatchObject({ status: 201, body: { parentId: user.body.id } });
    return { sessionId: session.body.id, messageId: assistant.body.id };
  }

  it.each(loadBlockVectors())(
    '$file: posted in two batches (JSON, then NDJSON), reads back as the vector expects',
    async (vector) => {
      const { sessionId, messageId } = await assistantMessage();
      const chunks = numberedChunks(vector);
      const half = Math.ceil(chunks.length / 2);
      const first = await ledger.request(
        'POST',
        `/v1/sessions/${sessionId}/messages/${messageId}/chunks`,
        chunks.slice(0, half),
      );
      expect(first).toMatchObject({ status: 200, body: { appended: half, duplicates: 0 } });
      const second = await ledger.request(
        'POST',
        `/v1/sessions/${sessionId}/messages/${messageId}/chunks`,
        chunks
          .slice(half)
          .map((chunk) => JSON.stringify(chunk))
          .join('\n'),
        'application/x-ndjson',
      );
      expect(second).toMatchObject({ status: 200, body: { appended: chunks.length - half, duplicates: 0 } });
      expect(second.body.position).toBeGreaterThan(first.body.position);

      // Read your writes: the read models have reached the append's position.
      const message = await ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${second.body.position}`,
      );
      expect(message.status).toBe(200);
      expect(message.body.status).toBe(vector.expected.messageStatus);
      const [actual, expected] = compareBlocks(message.body.blocks, vector.expected.blocks);
      expect(actual).toEqual(expected);
      // The message and its blocks as the read models give them equal a fold of the log, field for field.
      const foldedMessage = await ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/messages/${messageId}?at=${second.body.position}`,
      );
      expect(message.body).toStrictEqual(foldedMessage.body);

      const session = await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${second.body.position}`);
      expect(session.body.messages.map((m: { id: string }) => m.id).at(-1)).toBe(messageId);
      expect(session.body.position).toBeGreaterThanOrEqual(second.body.position);
      // The projected read models and a fold of the log with the same reducer agree exactly.
      const folded = await ledger.request('GET', `/v1/sessions/${sessionId}?at=${second.body.position}`);
      expect(session.body.messages).toEqual(folded.body.messages);
    },
  );

  it('a retried batch records nothing twice and reports its duplicates; ?at= shows the session as it was', async () => {
    const { sessionId, messageId } = await assistantMessage();
    const batch = [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.delta', text: 'Hello' },
    ];
    const first = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, batch);
    const retry = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, batch);
    expect(retry).toMatchObject({ status: 200, body: { appended: 0, duplicates: 3, position: first.body.position } });
    const more = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, [
      batch[2],
      { seq: 4, type: 'text.delta', text: 'Hello, world' },
    ]);
    expect(more).toMatchObject({ status: 200, body: { appended: 1, duplicates: 1 } });

    const events = await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=100`);
    expect(events.body.events.filter((event: { type: string }) => event.type.startsWith('chunk.'))).toHaveLength(4);
    expect(events.body.events.at(-1).data).toEqual({ messageId, seq: 4, type: 'text.delta', append: ', world' });

    const before = await ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/messages/${messageId}?at=${first.body.position}`,
    );
    expect(before.body.blocks[0]).toMatchObject({ type: 'main_text', status: 'streaming', content: 'Hello' });
    const now = await ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${more.body.position}`,
    );
    expect(now.body.blocks[0]).toMatchObject({ content: 'Hello, world' });
  });

  it('serves its OpenAPI description at /docs', async () => {
    const openapi = await ledger.request('GET', '/docs/openapi.json');
    expect(openapi.status).toBe(200);
    expect(Object.keys(openapi.body.paths)).toEqual(
      expect.arrayContaining(['/v1/sessions', '/v1/sessions/{sid}/messages/{mid}/chunks', '/health', '/metrics']),
    );
    expect((await fetch(`${ledger.baseUrl}/docs`)).status).toBe(200);
  });

  it('pages the raw events of a session', async () => {
    const { sessionId } = await assistantMessage();
    const page = await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=2`);
    expect(page.body.events.map((event: { type: string }) => event.type)).toEqual([
      'session.opened',
      'message.created',
    ]);
    const rest = await ledger.request('GET', `/v1/sessions/${sessionId}/events?from=${page.body.next}`);
    expect(rest.body).toMatchObject({ events: [{ type: 'message.created', data: { role: 'assistant' } }], next: null });
  });
});
