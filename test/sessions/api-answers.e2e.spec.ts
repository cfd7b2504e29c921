import { IGNORED_CHUNK_CASES } from '../../libs/core/src/testing/ignored-chunks.js';
import pg from 'pg';
import { connectSse } from '../support/sse-client.js';
import { authorization } from '../support/test-credentials.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * Answers a new integrator can rely on (issue 17): safe retries of creates, `lastSeq`, what a
 * chunk batch had no effect on, positions as numbers, one rule for positions beyond the log's
 * head, whole assistant messages, and a credential reading its own writes.
 */
describe('answers an integrator can rely on', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  const numbered = (from: number, ...chunks: object[]) =>
    chunks.map((chunk, index) => ({ seq: from + index, ...chunk }));
  async function ok(method: string, path: string, body?: unknown) {
    const response = await ledger.request(method, path, body);
    expect({ path, status: response.status < 300 }).toEqual({ path, status: true });
    return response.body;
  }
  async function eventCount(sessionId: string): Promise<number> {
    return (await ok('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).events.length;
  }
  async function headPosition(): Promise<number> {
    const sessionId = (await ok('POST', '/v1/sessions', {})).id;
    return (await ok('GET', `/v1/sessions/${sessionId}/events`)).events.at(-1).position;
  }

  describe('safe retries', () => {
    it('answers the same session create again with 200 and the original result; another body is 409 naming the field', async () => {
      const body = { id: 'retried-session', title: 'T', metadata: { team: 'a' } };
      const first = await ledger.request('POST', '/v1/sessions', body);
      expect(first).toMatchObject({ status: 201, body: { id: 'retried-session' } });
      await ok('POST', '/v1/sessions/retried-session/messages', { role: 'user', content: 'later' });
      const events = await eventCount('retried-session');

      const again = await ledger.request('POST', '/v1/sessions', { metadata: { team: 'a' }, title: 'T', id: body.id });
      expect(again).toEqual({ status: 200, body: first.body });
      const conflicts = [
        [{ ...body, title: 'other' }, 'title'],
        [{ ...body, metadata: { team: 'b' } }, 'metadata'],
        [{ ...body, writers: ['subject:someone'] }, 'writers'],
      ] as const;
      for (const [changed, field] of conflicts) {
        const refused = await ledger.request('POST', '/v1/sessions', changed);
        expect(refused).toMatchObject({ status: 409, body: { error: { code: 'session_exists', field } } });
        expect(refused.body.error.message).toContain(field);
      }
      expect(await eventCount('retried-session')).toBe(events);
    });

    it('answers the same message create again with 200 and the original result; another body is 409 naming the field', async () => {
      const sessionId = (await ok('POST', '/v1/sessions', {})).id;
      await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'hi' });
      const create = { id: 'a1', role: 'assistant', model: 'm' };
      const first = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, create);
      expect(first).toMatchObject({ status: 201, body: { id: 'a1', parentId: 'u1' } });
      await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, numbered(1, { type: 'llm_response_created' }));
      const events = await eventCount(sessionId);

      // Omitted, the parent was the active leaf then (now a1 itself): a retry matches it.
      expect(await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, create)).toEqual({
        status: 200,
        body: first.body,
      });
      expect(await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { ...create, parentId: 'u1' })).toEqual(
        { status: 200, body: first.body },
      );
      const conflicts = [
        [{ ...create, role: 'user' }, 'role'],
        [{ ...create, content: 'whole' }, 'content'],
        [{ ...create, parentId: null }, 'parentId'],
        [{ ...create, model: 'other' }, 'model'],
      ] as const;
      for (const [changed, field] of conflicts) {
        const refused = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, changed);
        expect(refused).toMatchObject({ status: 409, body: { error: { code: 'message_exists', field } } });
      }
      expect(await eventCount(sessionId)).toBe(events);
    });

    it('tells a producer where to resume: lastSeq on message reads, from the read models and from the log', async () => {
      const sessionId = (await ok('POST', '/v1/sessions', {})).id;
      await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'hi' });
      await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
      const fresh = await ok('GET', `/v1/sessions/${sessionId}/messages/a1`);
      expect(fresh.lastSeq).toBe(0);
      const chunks = numbered(
        1,
        { type: 'llm_response_created' },
        { type: 'text.start' },
        { type: 'text.delta', text: 'He' },
      );
      const { position } = await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, chunks);
      expect((await ok('GET', `/v1/sessions/${sessionId}/messages/a1?minPosition=${position}`)).lastSeq).toBe(3);
      expect((await ok('GET', `/v1/sessions/${sessionId}/messages/a1?at=${position}`)).lastSeq).toBe(3);
      const read = await ok('GET', `/v1/sessions/${sessionId}?minPosition=${position}`);
      expect(read.messages.map((message: { lastSeq: number }) => message.lastSeq)).toEqual([0, 3]);
    });
  });

  it('a read that waited for a position other streams ended at reports that position', async () => {
    const sessionId = (await ok('POST', '/v1/sessions', {})).id;
    // Minting a key records a credential event: the newest position, and no session's.
    await authorization(ledger.baseUrl, `reader-${sessionId}`);
    const sql = new pg.Client({ connectionString: ledger.database.connectionString });
    await sql.connect();
    const { rows } = await sql
      .query<{ position: string }>(`SELECT max(position) AS position FROM event_log_events`)
      .finally(() => sql.end());
    const head = Number(rows[0].position);
    expect((await ok('GET', `/v1/sessions/${sessionId}/events`)).events.at(-1).position).toBeLessThan(head);
    expect((await ok('GET', `/v1/sessions/${sessionId}?minPosition=${head}`)).position).toBeGreaterThanOrEqual(head);
  });

  describe('chunks that change nothing', () => {
    it.each(IGNORED_CHUNK_CASES)(
      'reports $label as ignored with its reason, and the log records it',
      async ({ chunks, seq, reason }) => {
        const sessionId = (await ok('POST', '/v1/sessions', {})).id;
        await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
        const before = await eventCount(sessionId);
        const answer = await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, numbered(1, ...chunks));
        expect(answer).toMatchObject({ appended: chunks.length, duplicates: 0, ignored: [{ seq, reason }] });
        expect(await eventCount(sessionId)).toBe(before + chunks.length);
      },
    );

    it('reports nothing for a well-formed answer, and a repeated batch reports its duplicates only', async () => {
      const sessionId = (await ok('POST', '/v1/sessions', {})).id;
      await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
      const chunks = numbered(
        1,
        { type: 'llm_response_created' },
        { type: 'text.start' },
        { type: 'text.delta', text: 'Hi' },
        { type: 'text.complete', text: 'Hi' },
        { type: 'block_complete' },
        { type: 'llm_response_complete' },
      );
      expect(await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, chunks)).toMatchObject({
        appended: 6,
        ignored: [],
      });
      expect(await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, chunks)).toMatchObject({
        appended: 0,
        duplicates: 6,
        ignored: [],
      });
    });
  });

  describe('one rule for a position beyond the log head: 422 position_beyond_head naming the parameter', () => {
    let sessionId: string;
    beforeAll(async () => {
      sessionId = (await ok('POST', '/v1/sessions', {})).id;
      await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'hi' });
    });
    const beyondHead = (field: string) => ({ status: 422, body: { error: { code: 'position_beyond_head', field } } });

    it('?at on every read', async () => {
      const ahead = (await headPosition()) + 1_000;
      for (const route of ['', '/tree', '/history', '/messages/u1']) {
        expect(await ledger.request('GET', `/v1/sessions/${sessionId}${route}?at=${ahead}`)).toMatchObject(
          beyondHead('at'),
        );
      }
    });

    // `BigInt` read `0x10` as 16 and a blank as 0: one position had several spellings.
    it('a position written other than in decimal digits is refused, naming the parameter', async () => {
      for (const spelled of ['0x10', '0b1', '%20', '%2B5', '1e3', '-1', '1.0']) {
        const answer = await ledger.request('GET', `/v1/sessions/${sessionId}?at=${spelled}`);
        expect(answer).toMatchObject({ status: 400, body: { error: { field: 'at' } } });
      }
      const fork = await ledger.request('POST', `/v1/sessions/${sessionId}/fork`, { atPosition: '0x1' });
      expect(fork).toMatchObject({ status: 400, body: { error: { field: 'atPosition' } } });
    });

    it('?minPosition, after its wait', async () => {
      const ahead = (await headPosition()) + 1_000;
      expect(await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${ahead}`)).toMatchObject(
        beyondHead('minPosition'),
      );
    });

    it('from on the event pages and the live feeds', async () => {
      const ahead = (await headPosition()) + 1_000;
      expect(await ledger.request('GET', `/v1/sessions/${sessionId}/events?from=${ahead}`)).toMatchObject(
        beyondHead('from'),
      );
      for (const route of [`/v1/sessions/${sessionId}/live`, '/v1/events/live']) {
        const feed = connectSse(`${ledger.baseUrl}${route}?from=${ahead}`);
        expect(await feed.opened).toMatchObject(beyondHead('from'));
      }
    });

    it('atPosition on a fork', async () => {
      const ahead = (await headPosition()) + 1_000;
      expect(await ledger.request('POST', `/v1/sessions/${sessionId}/fork`, { atPosition: ahead })).toMatchObject(
        beyondHead('atPosition'),
      );
    });

    it('the head itself is no position beyond it', async () => {
      const head = await headPosition();
      expect((await ledger.request('GET', `/v1/sessions/${sessionId}?at=${head}`)).status).toBe(200);
      expect((await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${head}`)).status).toBe(200);
    });
  });

  it('gives fork answers and fork reads their positions as JSON numbers', async () => {
    const source = (await ok('POST', '/v1/sessions', {})).id;
    const { position } = await ok('POST', `/v1/sessions/${source}/messages`, { id: 'u1', role: 'user', content: 'q' });
    const fork = await ok('POST', `/v1/sessions/${source}/fork`, { atPosition: position });
    expect(fork.forkedFrom).toEqual({ sessionId: source, position, messageId: null });
    expect(typeof fork.position).toBe('number');
    expect((await ok('GET', `/v1/sessions/${fork.id}`)).forkedFrom).toEqual(fork.forkedFrom);
    expect((await ok('GET', `/v1/sessions/${fork.id}?at=${fork.position}`)).forkedFrom).toEqual(fork.forkedFrom);
  });

  it('takes an assistant message created with its whole content as complete', async () => {
    const sessionId = (await ok('POST', '/v1/sessions', {})).id;
    await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: 'hi' });
    const { position } = await ok('POST', `/v1/sessions/${sessionId}/messages`, {
      id: 'a1',
      role: 'assistant',
      content: 'Hello there',
    });
    for (const read of [`?minPosition=${position}`, `?at=${position}`]) {
      const message = await ok('GET', `/v1/sessions/${sessionId}/messages/a1${read}`);
      expect(message).toMatchObject({
        status: 'success',
        blocks: [{ type: 'main_text', status: 'success', content: 'Hello there' }],
      });
    }
    const history = await ok('GET', `/v1/sessions/${sessionId}/history?minPosition=${position}`);
    expect(history.messages).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello there' },
    ]);
    const late = await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, numbered(1, { type: 'text.start' }));
    expect(late.ignored).toEqual([{ seq: 1, reason: 'message already finalized' }]);
  });

  it('lets a credential read its own writes at once, without ?minPosition', async () => {
    const sessionId = (await ok('POST', '/v1/sessions', {})).id;
    await ok('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' });
    const stale: number[] = [];
    for (let seq = 1; seq <= 15; seq += 1) {
      const text = `step ${seq}`;
      const chunk = seq === 1 ? { type: 'text.start' } : { type: 'text.delta', text };
      await ok('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, numbered(seq, chunk));
      const read = await ok('GET', `/v1/sessions/${sessionId}/messages/a1`);
      if (read.lastSeq !== seq) stale.push(seq);
    }
    expect(stale).toEqual([]);
  });

  it('lists a session its credential just created or wrote to, without ?minPosition', async () => {
    const missing: string[] = [];
    for (let round = 0; round < 10; round += 1) {
      const sessionId = (await ok('POST', '/v1/sessions', { title: `listed ${round}` })).id;
      const listed = await ok('GET', `/v1/sessions?q=${encodeURIComponent(`listed ${round}`)}&limit=100`);
      if (!listed.sessions.some((session: { sessionId: string }) => session.sessionId === sessionId))
        missing.push(sessionId);
    }
    expect(missing).toEqual([]);
  });
});
