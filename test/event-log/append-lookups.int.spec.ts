import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { APPEND_LOCK_KEY } from '../../libs/event-log/src/postgres/group-commit-writer.js';
import { rowsRead, type PlanNode } from '../support/query-plans.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const LOOKED_UP = ['event_log_streams', 'event_log_envelopes'];

const OTHER_SESSIONS = 3_000;
const HASH = 'a'.repeat(64);

/**
 * `event_log_append` looks up each stream and envelope of a batch (migration 1763800000340). The
 * planner takes the batch for a hundred rows whatever its size: joined, those lookups read the
 * whole stream and envelope tables on every append while they held a few thousand rows (an envelope
 * per session). Each must read only the row it looks up, for a stream or an envelope new to the
 * log and for one it holds.
 */
describe('the append function on a log of many sessions', () => {
  let database: TestDatabase;
  let sql: pg.Client;
  const plans: PlanNode[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    sql = new pg.Client({ connectionString: database.connectionString });
    await sql.connect();
    await sql.query(
      `INSERT INTO event_log_envelopes (tenant, actor, correlation_id)
       SELECT 'default', 'producer', 'session-' || g FROM generate_series(1, $1::int) g`,
      [OTHER_SESSIONS],
    );
    await sql.query(
      `INSERT INTO event_log_streams (stream_id, revision, last_hash)
       SELECT 'session-' || g, 0, decode($2, 'hex') FROM generate_series(1, $1::int) g`,
      [OTHER_SESSIONS, HASH],
    );
    await sql.query('ANALYZE event_log_streams, event_log_envelopes');
    // Every statement the function runs, planned and counted, comes back to this client as a notice.
    sql.on('notice', (notice) => {
      const [, json] = (notice.message ?? '').split('plan:\n');
      if (json) plans.push((JSON.parse(json) as { Plan: PlanNode }).Plan);
    });
    await sql.query("LOAD 'auto_explain'");
    for (const setting of [
      'log_min_duration = 0',
      'log_nested_statements = on',
      'log_analyze = on',
      'log_format = json',
      'log_level = notice',
    ])
      await sql.query(`SET auto_explain.${setting}`);
  });

  afterAll(async () => {
    await sql.end();
    await database.drop();
  });

  /** One event appended to each of `streamIds` at `revision`, each under its session's envelope, through the function alone. */
  async function append(streamIds: readonly string[], revision: number): Promise<void> {
    const existed = revision > 0;
    const streams = streamIds.map((streamId, n) => ({
      ...{ n, stream_id: streamId, revision, last_hash: HASH },
      ...{ expected_revision: existed ? revision - 1 : null, expected_hash: existed ? HASH : null },
    }));
    const envelopes = streamIds.map((streamId, n) => ({
      n,
      tenant: 'default',
      actor: 'producer',
      correlation_id: streamId,
    }));
    const events = streamIds.map((_, n) => ({
      ...{ ordinal: n + 1, stream: n, envelope: n, revision, event_id: randomUUID(), type: 'chunk.text.delta' },
      ...{ data: { text: 'hi' }, recorded_at: new Date().toISOString(), schema_version: 1, causation_id: null },
      ...{ prev_hash: HASH, hash: HASH },
    }));
    plans.length = 0;
    const { rows } = await sql.query<{ head: string | null }>(
      'SELECT event_log_append($1::jsonb, $2::jsonb, $3::jsonb, $4, $5)::text AS head',
      [JSON.stringify(events), JSON.stringify(streams), JSON.stringify(envelopes), APPEND_LOCK_KEY, 'test_channel'],
    );
    expect(rows[0].head).not.toBeNull();
  }

  const newSessions = (run: string, count: number) =>
    Array.from({ length: count }, (_, index) => `new-${run}-${index}`);

  // Whatever the session's plan cache mode: the function plans its statements for any call. A batch of a hundred
  // entries is what a plan made for its own values took for a hundred rows again, and scanned.
  it.each([
    ['a stream and an envelope new to the log', 'force_custom_plan', newSessions('a', 1), 0],
    ['a stream and an envelope it holds', 'force_custom_plan', ['session-7'], 1],
    ['100 streams and envelopes new to the log', 'force_custom_plan', newSessions('b', 100), 0],
    ['a stream and an envelope new to the log', 'force_generic_plan', newSessions('c', 1), 0],
    ['a stream and an envelope it holds', 'force_generic_plan', ['session-8'], 1],
    ['100 streams and envelopes it holds', 'force_generic_plan', newSessions('b', 100), 1],
  ])('reads only the rows it looks up, for %s (%s)', async (_case, planMode, streamIds, revision) => {
    await sql.query(`SET plan_cache_mode = ${planMode}`);
    await append(streamIds, revision);
    // The function's own statements: its call, and the lock and notification, plan no table.
    expect(plans.length).toBeGreaterThanOrEqual(6);
    const read = plans.reduce((sum, plan) => sum + rowsRead(plan, LOOKED_UP), 0);
    // Per entry, the stream's check, its upsert's arbiter aside, and the event's two keys: a row each at most,
    // and the envelope once more.
    expect(read).toBeLessThanOrEqual(4 * streamIds.length);
    // Each event under its own session's envelope (the correlation id is the stream id here), not another's.
    const { rows } = await sql.query<{ stream_id: string; correlation_id: string }>(
      'SELECT stream_id, correlation_id FROM event_log_records WHERE stream_id = ANY($1) AND revision = $2',
      [streamIds, revision],
    );
    expect(rows.sort((a, b) => a.stream_id.localeCompare(b.stream_id))).toEqual(
      [...streamIds]
        .sort((a, b) => a.localeCompare(b))
        .map((streamId) => ({ stream_id: streamId, correlation_id: streamId })),
    );
  });
});
