import { foldFootprint, parseChunks, sessionStreamId, type SessionState } from '#core';
import type { ReadStreamOptions } from '#event-log';
import { inTransaction } from '../../apps/ledger/src/database/transaction.js';
import { handleBatch } from '../../apps/ledger/src/projections/projection.js';
import { blockReadModelsProjection } from '../../apps/ledger/src/sessions/read-models/block-read-models.projection.js';
import type { SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { pendingToolCalls } from '../../libs/core/src/testing/ignored-chunks.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { sessionLogDatabase, type SessionLogDatabase } from '../support/session-log-database.js';

/**
 * The block projection keeps the sessions it folded, to fold only what each batch adds. It keeps them within a budget
 * of memory by their footprint, blocks counted: a session of many tool calls makes the others leave, and a session
 * dropped is read again from the log, its rows the same.
 */
describe('the block projection’s folds in memory', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  const filter = { streamPrefixes: ['session-'] };
  let fixture: SessionLogDatabase;

  beforeAll(async () => {
    fixture = await sessionLogDatabase();
  });

  afterAll(() => fixture.close());

  it('keep within their budget, a session over it alone: the others are read again when next needed, rows the same', async () => {
    const { log, pool, repository } = fixture;
    const append = (sessionId: string, chunks: Record<string, unknown>[]) =>
      repository.execute(
        { tenant: 'default', sessionId },
        { type: 'append_chunks', messageId: 'a1', chunks: parseChunks(chunks) },
        author,
      );
    for (const sessionId of ['calls', 'text']) {
      await repository.execute({ tenant: 'default', sessionId }, openSessionCommand(sessionId), author);
      await repository.execute({ tenant: 'default', sessionId }, assistantMessageCommand('a1'), author);
    }
    await append('calls', [{ seq: 1, type: 'mcp_tool_pending', responses: pendingToolCalls(1_000) }]);
    await append('text', [
      { seq: 1, type: 'text.start' },
      { seq: 2, type: 'text.delta', text: 'hello' },
    ]);
    const footprint = (sessionId: string) =>
      foldFootprint(repository.cached({ tenant: 'default', sessionId }) as SessionState);
    // Room for the text session's fold many times over, not for the calls'.
    const budget = 10 * footprint('text');
    expect(footprint('calls')).toBeGreaterThan(budget);

    const streamsRead: string[] = [];
    // The log itself, its stream reads counted.
    const reader = new Proxy(log, {
      get(target, name) {
        if (name === 'readStream')
          return (streamId: string, options?: ReadStreamOptions) => {
            streamsRead.push(streamId);
            return target.readStream(streamId, options);
          };
        const value: unknown = Reflect.get(target, name);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const projection = blockReadModelsProjection(budget);
    let checkpoint = 0n;
    const project = async () => {
      const batch = await log.readAllForProjections({ fromPosition: checkpoint, filter });
      checkpoint = batch.checkpoint;
      await inTransaction(pool, (client) => handleBatch(projection, batch.events, { client, eventLog: reader }));
    };
    // One batch of both: the text session, folded last, is kept; the calls', over the budget, is dropped for it.
    await project();
    expect(streamsRead).toEqual([]);
    await append('text', [{ seq: 3, type: 'text.delta', text: 'hello world' }]);
    await project();
    expect(streamsRead).toEqual([]);
    // The calls' session is read again, and kept alone: the one in use.
    await append('calls', [
      { seq: 2, type: 'mcp_tool_complete', responses: [{ ...pendingToolCalls(1)[0], status: 'done', response: 'r' }] },
    ]);
    await project();
    expect(streamsRead).toEqual([sessionStreamId('default', 'calls')]);
    await append('text', [{ seq: 4, type: 'text.delta', text: 'hello world!' }]);
    await project();
    expect(streamsRead).toEqual([sessionStreamId('default', 'calls'), sessionStreamId('default', 'text')]);

    const { rows } = await pool.query<{ session_id: string; blocks: string; done: string; text: string | null }>(
      `SELECT session_id, count(*) AS blocks, count(*) FILTER (WHERE status = 'success') AS done,
         max(content #>> '{}') FILTER (WHERE type = 'main_text') AS text
         FROM message_blocks GROUP BY session_id ORDER BY session_id`,
    );
    expect(rows).toEqual([
      { session_id: 'calls', blocks: '1000', done: '1', text: null },
      { session_id: 'text', blocks: '1', done: '0', text: 'hello world!' },
    ]);
  });
});
