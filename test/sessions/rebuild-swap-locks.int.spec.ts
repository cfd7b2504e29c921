import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { rebuildProjection } from '../../apps/ledger/src/projections/rebuild.js';
import { blockReadModelsProjection } from '../../apps/ledger/src/sessions/read-models/block-read-models.projection.js';
import { BLOCK_READ_MODEL_TABLES } from '../../apps/ledger/src/sessions/read-models/block-read-model-tables.js';
import { assistantMessageCommand, openSessionCommand } from '../support/session-commands.js';
import { sessionLogDatabase, type SessionLogDatabase } from '../support/session-log-database.js';

/**
 * A rebuild's swap locks the live tables one after the other. A runner's write locks the same tables in an
 * order of PostgreSQL's choosing: once prepared, its target (`message_blocks`) first. Holding `sessions` while
 * it waits for `message_blocks`, the swap closes a deadlock with a write holding `message_blocks` and waiting
 * for `sessions`. PostgreSQL ends it after `deadlock_timeout` (a second) by failing the lock of the one that
 * waited longest, the swap. The swap then lets go of its tables and takes them again.
 */
describe('a rebuild swap beside a write that holds a table it needs', () => {
  let fixture: SessionLogDatabase;
  let writer: pg.Client;

  beforeAll(async () => {
    fixture = await sessionLogDatabase();
    writer = new pg.Client({ connectionString: fixture.database.connectionString });
    await writer.connect();
    // The backend that checks first is the victim: the swap's check (a second into its wait) must come first, which
    // a loaded machine can delay past the write's own when both wait a second (seen once in CI).
    await writer.query("SET deadlock_timeout = '10s'");
  });

  afterAll(async () => {
    await writer.end();
    await fixture.close();
  });

  it('gives way: the write takes the table it waits for, then the swap completes', async () => {
    const sessionId = `s-${randomUUID()}`;
    for (const command of [openSessionCommand(sessionId), assistantMessageCommand('a1')])
      await fixture.repository.execute({ tenant: 'default', sessionId }, command, {
        actor: 'producer',
        subject: 'producer',
      });
    // The write as a prepared statement runs it: its target first.
    await writer.query('BEGIN');
    await writer.query('LOCK TABLE message_blocks IN ROW EXCLUSIVE MODE');
    const rebuilt = rebuildProjection(fixture.pool, fixture.log, blockReadModelsProjection(), BLOCK_READ_MODEL_TABLES);
    // The swap holds sessions and messages and waits for message_blocks.
    const swapWaits = async () => {
      const { rows } = await writer.query<{ waiting: number }>(
        `SELECT count(*)::int AS waiting FROM pg_locks
          WHERE relation = 'message_blocks'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted`,
      );
      return rows[0].waiting > 0;
    };
    for (let tries = 0; !(await swapWaits()); tries += 1) {
      if (tries > 500) throw new Error('the swap never waited for message_blocks');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // The write goes on to the next table: this closes the deadlock.
    await writer.query('LOCK TABLE sessions IN ROW EXCLUSIVE MODE');
    await writer.query('COMMIT');
    const result = await rebuilt;
    expect(result.events).toBeGreaterThan(0);
    const { rows } = await fixture.pool.query<{ id: string }>('SELECT id FROM sessions');
    expect(rows).toEqual([{ id: sessionId }]);
  });
});
