import { randomUUID } from 'node:crypto';
import type { EventLog } from '#event-log';
import type pg from 'pg';
import { inTransaction } from '../../apps/ledger/src/database/transaction.js';
import { rebuildProjection } from '../../apps/ledger/src/projections/rebuild.js';
import { handleBatch } from '../../apps/ledger/src/projections/projection.js';
import { blockReadModelsProjection } from '../../apps/ledger/src/sessions/read-models/block-read-models.projection.js';
import { BLOCK_READ_MODEL_TABLES } from '../../apps/ledger/src/sessions/read-models/block-read-model-tables.js';
import { type SessionRepository, type SessionAuthor } from '../../apps/ledger/src/sessions/session-repository.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { sessionLogDatabase, type SessionLogDatabase } from '../support/session-log-database.js';

/**
 * The block projection's write is a named prepared statement (decision 0038): a connection that has
 * prepared it must still write into the tables its names resolve to now, under a rebuild's scratch
 * `search_path` and after the rebuild swapped the tables in.
 */
describe('prepared projection writes across a rebuild', () => {
  const author: SessionAuthor = { actor: 'producer', subject: 'producer' };
  let log: EventLog;
  let repository: SessionRepository;
  // Two connections: a rebuild holds one for its lock and writes on the other, so both have prepared the write.
  let pool: pg.Pool;
  let fixture: SessionLogDatabase;

  beforeAll(async () => {
    fixture = await sessionLogDatabase();
    ({ log, repository, pool } = fixture);
  });

  afterAll(() => fixture.close());

  async function session(): Promise<string> {
    const sessionId = `s-${randomUUID()}`;
    const ref = { tenant: 'default', sessionId };
    for (const command of [openSessionCommand(sessionId), assistantMessageCommand('a1')])
      await repository.execute(ref, command, author);
    return sessionId;
  }

  /** The live projection's write, on each pooled connection at once, from what the log holds now. */
  async function projectOnEveryConnection(): Promise<void> {
    const { events } = await log.readAllForProjections({ filter: { streamPrefixes: ['session-'] } });
    const clients = await Promise.all([pool.connect(), pool.connect()]);
    try {
      for (const client of clients)
        await inTransaction(client, (held) =>
          handleBatch(blockReadModelsProjection(), events, { client: held, eventLog: log }),
        );
    } finally {
      for (const client of clients) client.release();
    }
  }

  const sessionIds = async (schema: string) =>
    (await pool.query<{ id: string }>(`SELECT id FROM ${schema}.sessions ORDER BY id`)).rows.map((row) => row.id);

  it('writes into the scratch tables during a rebuild, and into the swapped-in tables after it', async () => {
    const first = await session();
    await projectOnEveryConnection();
    expect(await sessionIds('public')).toEqual([first]);

    // Projected by the rebuild only: were its write to go to the live tables, the swap would drop this row.
    const second = await session();
    const rebuilt = await rebuildProjection(pool, log, blockReadModelsProjection(), BLOCK_READ_MODEL_TABLES, 2);
    expect(rebuilt.events).toBeGreaterThan(0);
    expect(await sessionIds('public')).toEqual([first, second].sort());

    const third = await session();
    await projectOnEveryConnection();
    expect(await sessionIds('public')).toEqual([first, second, third].sort());
    const { rows } = await pool.query("SELECT 1 FROM pg_namespace WHERE starts_with(nspname, 'rebuild_')");
    expect(rows).toEqual([]);
  });
});
