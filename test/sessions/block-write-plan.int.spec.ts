import { randomUUID } from 'node:crypto';
import { parseChunks, type SessionCommand } from '#core';
import { inTransaction } from '../../apps/ledger/src/database/transaction.js';
import { handleBatch } from '../../apps/ledger/src/projections/projection.js';
import { blockReadModelsProjection } from '../../apps/ledger/src/sessions/read-models/block-read-models.projection.js';
import type { SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { pendingToolCalls } from '../../libs/core/src/testing/ignored-chunks.js';
import { rowsRead, type PlanNode } from '../support/query-plans.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { sessionLogDatabase, type SessionLogDatabase } from '../support/session-log-database.js';

const OTHER_BLOCKS = 1_500;
/** Blocks of the one session in the second test: its lookups through the wrong index would read their square. */
const CALLS = 2_000;

/**
 * The block projection's write looks up each changed block's old row (its search vector is carried
 * on from it). The planner takes the batch's rows for a hundred, whatever their number: joined to
 * the table, that lookup read every block for a batch of one, on every table of up to a few
 * thousand blocks (a new deployment's, a bench's). It must read only the row it looks up.
 */
describe('the block projection write on a table of other sessions’ blocks', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  let fixture: SessionLogDatabase;

  beforeAll(async () => {
    fixture = await sessionLogDatabase();
  });

  afterAll(() => fixture.close());

  /** A new session with an assistant message `a1`, and how to append chunks to it, numbered from 1 on. */
  async function answeringSession() {
    const sessionId = `s-${randomUUID()}`;
    const ref = { tenant: 'default', sessionId };
    for (const command of [openSessionCommand(sessionId), assistantMessageCommand('a1')])
      await fixture.repository.execute(ref, command, author);
    let seq = 0;
    const append = (...chunks: Record<string, unknown>[]) => {
      const numbered = parseChunks(chunks.map((chunk) => ({ seq: ++seq, ...chunk })));
      return fixture.repository.execute(ref, { type: 'append_chunks', messageId: 'a1', chunks: numbered }, author);
    };
    return { sessionId, append };
  }

  it('reads only the old row of the block it writes, planned for the batch or for any, and removes by key', async () => {
    const { log, pool } = fixture;
    const projection = blockReadModelsProjection();
    const { sessionId, append } = await answeringSession();
    const filter = { streamPrefixes: ['session-'] };
    await append({ type: 'llm_response_created' }, { type: 'text.start' }, { type: 'text.delta', text: 'hello' });
    const first = await log.readAllForProjections({ filter });
    await inTransaction(pool, (client) => handleBatch(projection, first.events, { client, eventLog: log }));
    // Other sessions' blocks, copies of this one, and statistics that know of them.
    await pool.query(
      `INSERT INTO message_blocks (tenant, id, message_id, session_id, index, type, status, content, tool_id, tool_name,
         arguments, tool_response, metadata, error, extra, created_at, updated_at, position, search, search_finished_chars)
       SELECT tenant, id, message_id, session_id || '-' || g, index, type, status, content, tool_id, tool_name, arguments,
         tool_response, metadata, error, extra, created_at, updated_at, position, search, search_finished_chars
         FROM message_blocks, generate_series(1, $1) AS g`,
      [OTHER_BLOCKS],
    );
    await pool.query('ANALYZE message_blocks');
    const { rows: blocks } = await pool.query<{ id: string }>('SELECT id FROM message_blocks WHERE session_id = $1', [
      sessionId,
    ]);
    expect(blocks).toHaveLength(1);
    const blockId = blocks[0].id;

    await append({ type: 'text.delta', text: 'hello world' });
    const { events } = await log.readAllForProjections({ fromPosition: first.checkpoint, filter });
    const client = await pool.connect();
    const statement = (await projection.writes!(events, { client, eventLog: log }))!;
    const read: Record<string, number> = {};
    try {
      // Planned for these values, then cached for any, as the runner's prepared statement is after five batches.
      // EXPLAIN ANALYZE runs the write: what it wrote is checked below.
      await client.query(`PREPARE block_write AS ${statement.text}`);
      const literals = statement.values.map((value) => client.escapeLiteral(String(value))).join(', ');
      for (const planMode of ['force_custom_plan', 'force_generic_plan']) {
        await client.query(`SET plan_cache_mode = ${planMode}`);
        const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE block_write(${literals})`,
        );
        read[planMode] = rowsRead(rows[0]['QUERY PLAN'][0].Plan, ['message_blocks']);
      }
    } finally {
      await client.query('DEALLOCATE ALL; RESET plan_cache_mode');
      // Destroyed: `pg` still takes the named statements it prepared on it for there.
      client.release(true);
    }
    // The old row of the block written, found by key, and the first row the removal's join takes before it finds
    // nothing to remove. The old statement scanned the whole table for the old row.
    for (const [planMode, rows] of Object.entries(read)) expect([planMode, rows <= 2]).toEqual([planMode, true]);

    // A block that left its message's list, in the same batch as the write ($1 lists what is removed): one of the copies.
    const removed = { tenant: 'default', session_id: `${sessionId}-7`, id: blockId };
    await pool.query(statement.text, [JSON.stringify([removed]), ...statement.values.slice(1)]);
    const { rows: written } = await pool.query<{ text: string; count: string; removed: string }>(
      `SELECT content #>> '{}' AS text, (SELECT count(*) FROM message_blocks) AS count,
         (SELECT count(*) FROM message_blocks WHERE session_id = $2) AS removed
         FROM message_blocks WHERE tenant = 'default' AND session_id = $1`,
      [sessionId, removed.session_id],
    );
    expect(written).toEqual([{ text: 'hello world', count: String(OTHER_BLOCKS), removed: '0' }]);
  });

  it('reads one old row for a batch of many blocks of one session, whatever the statistics say', async () => {
    const { log, pool } = fixture;
    const projection = blockReadModelsProjection();
    const { append } = await answeringSession();
    // Statistics from before this session grew, as on a new deployment between two autovacuum runs.
    await pool.query('ANALYZE message_blocks; ALTER TABLE message_blocks SET (autovacuum_enabled = false)');
    const calls = pendingToolCalls(CALLS);
    const filter = { streamPrefixes: ['session-'] };
    const before = await log.readAllForProjections({ filter });
    await append(
      { type: 'mcp_tool_pending', responses: calls },
      { type: 'text.start' },
      { type: 'text.delta', text: 'reading' },
    );
    const opened = await log.readAllForProjections({ fromPosition: before.checkpoint, filter });
    await inTransaction(pool, (client) => handleBatch(projection, opened.events, { client, eventLog: log }));

    await append(
      { type: 'mcp_tool_complete', responses: calls.map((call) => ({ ...call, status: 'done', response: 'ok' })) },
      { type: 'text.delta', text: 'reading every file' },
    );
    const { events } = await log.readAllForProjections({ fromPosition: opened.checkpoint, filter });
    const client = await pool.connect();
    try {
      const statement = (await projection.writes!(events, { client, eventLog: log }))!;
      await client.query('BEGIN');
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`,
        [...statement.values],
      );
      // The streaming text's old row alone (its search vector goes on from it): through the index of a message's
      // blocks, that lookup read every block of the session, and so did each finished block's.
      expect(rowsRead(rows[0]['QUERY PLAN'][0].Plan, ['message_blocks'])).toBeLessThanOrEqual(2);
    } finally {
      await client.query('ROLLBACK; ALTER TABLE message_blocks RESET (autovacuum_enabled)');
      client.release();
    }
  });

  it('projects a batch in which two blocks have one id, instead of failing it at every retry', async () => {
    const { log, repository, pool } = fixture;
    const sessionId = `s-${randomUUID()}`;
    const ref = { tenant: 'default', sessionId };
    const before = await log.readAllForProjections({ filter: { streamPrefixes: ['session-'] } });
    const attachment = { name: 'f.txt', mimeType: 'text/plain', size: 1, sha256: 'a'.repeat(64), url: 'https://x/f' };
    for (const command of [
      openSessionCommand(sessionId),
      assistantMessageCommand('m'),
      // Its text block is `m-b1-text`…
      {
        type: 'create_message',
        messageId: 'm-b1',
        role: 'user',
        parentId: 'm',
        model: null,
        content: 'hello',
        attachments: [attachment],
      },
      // …and so is the block of this call, `m` + `-b1` (its seq) + `-text` (its id).
      {
        type: 'append_chunks',
        messageId: 'm',
        chunks: parseChunks([
          { seq: 1, type: 'mcp_tool_pending', responses: [{ id: 'text', tool: { name: 'read' }, status: 'pending' }] },
        ]),
      },
    ] satisfies SessionCommand[])
      await repository.execute(ref, command, author);
    const { events } = await log.readAllForProjections({
      fromPosition: before.checkpoint,
      filter: { streamPrefixes: ['session-'] },
    });
    await inTransaction(pool, (client) => handleBatch(blockReadModelsProjection(), events, { client, eventLog: log }));
    const { rows } = await pool.query<{ id: string }>('SELECT id FROM message_blocks WHERE session_id = $1', [
      sessionId,
    ]);
    expect(rows.map(({ id }) => id).sort()).toEqual(['m-b1-file1', 'm-b1-text']);
  });
});
