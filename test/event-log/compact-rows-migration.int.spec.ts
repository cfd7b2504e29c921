import { randomUUID } from 'node:crypto';
import {
  AppendFunction1763800000150,
  CompactEventLog1763800000250,
  createPostgresEventLog,
  EMPTY_STREAM,
  EventLog1763800000001,
  NO_STREAM,
  planAppend,
  prepareNewEvents,
  type EventLog,
  type NewEvent,
  type SealedEvent,
  WrongExpectedRevisionError,
} from '#event-log';
import { DataSource, type MigrationInterface } from 'typeorm';
import { dropDatabase, withClient } from '../support/test-database.js';

/**
 * Migration 1763800000250 converts a log written in the old layout (ids, names and hex hashes on
 * every row): every event reads back exactly as it was hashed and stored, and the streams go on
 * from where they stood.
 */
describe('compact event rows: converting a log written in the old layout', () => {
  const serverUrl = process.env.LEDGER_TEST_DATABASE_URL!;
  const name = `test_${randomUUID().replaceAll('-', '')}`;
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const connectionString = url.toString();
  let log: EventLog | undefined;

  const oldEvents: NewEvent[] = [
    { id: randomUUID(), type: 'session.opened', data: { title: 't' }, correlationId: 's1', actor: 'key:1:a' },
    {
      id: randomUUID(),
      type: 'chunk.text.delta',
      data: { seq: 0, append: 'hi' },
      correlationId: 's1',
      actor: 'key:1:a',
    },
    // A null correlation id and an empty one are different envelopes; a causation id stays on the row.
    { id: randomUUID(), type: 'toolcall.requested', data: {}, actor: 'saga', causationId: randomUUID() },
    {
      id: randomUUID(),
      type: 'toolcall.approved',
      data: { by: 'r' },
      correlationId: '',
      actor: 'saga',
      tenant: 'acme',
    },
  ];

  async function migrate(migrations: (new () => MigrationInterface)[]): Promise<void> {
    const dataSource = new DataSource({ type: 'postgres', url: connectionString, migrations, logging: false });
    await dataSource.initialize();
    try {
      await dataSource.runMigrations();
    } finally {
      await dataSource.destroy();
    }
  }

  /** What the old writer stored: one call of the old `event_log_append`, every field on every row. */
  async function appendInOldLayout(streamId: string, events: readonly NewEvent[]): Promise<SealedEvent[]> {
    const prepared = prepareNewEvents(streamId, events);
    const plan = planAppend(streamId, EMPTY_STREAM, new Map(), prepared, NO_STREAM, new Date('2026-01-02T03:04:05Z'));
    if (plan.kind !== 'write') throw new Error('expected a write');
    const rows = plan.events.map((event, index) => ({
      ordinal: index + 1,
      stream_id: event.streamId,
      revision: event.revision.toString(),
      event_id: event.id,
      type: event.type,
      data: event.data,
      recorded_at: event.metadata.recordedAt,
      schema_version: event.metadata.schemaVersion,
      correlation_id: event.metadata.correlationId,
      causation_id: event.metadata.causationId,
      actor: event.metadata.actor,
      tenant: event.metadata.tenant,
      prev_hash: event.metadata.prevHash,
      hash: event.metadata.hash,
    }));
    const head = plan.head;
    const streams = [
      {
        stream_id: streamId,
        expected_revision: null,
        expected_hash: null,
        revision: `${head.revision}`,
        last_hash: head.lastHash,
      },
    ];
    await withClient(connectionString, (client) =>
      client.query('SELECT event_log_append($1::jsonb, $2::jsonb, 1, $3)', [
        JSON.stringify(rows),
        JSON.stringify(streams),
        'event_log_test',
      ]),
    );
    return [...plan.events];
  }

  beforeAll(async () => {
    await withClient(serverUrl, (admin) => admin.query(`CREATE DATABASE ${name}`));
    await migrate([EventLog1763800000001, AppendFunction1763800000150]);
  });

  afterAll(async () => {
    await log?.close();
    await withClient(serverUrl, (admin) => dropDatabase(admin, name));
  });

  it('reads every converted event back as stored, and the streams continue their chains', async () => {
    const first = await appendInOldLayout('session-s1', oldEvents.slice(0, 2));
    const second = await appendInOldLayout('toolcall-acme/t1', oldEvents.slice(2));
    await migrate([EventLog1763800000001, AppendFunction1763800000150, CompactEventLog1763800000250]);
    log = await createPostgresEventLog({ connectionString });

    const { events } = await log.readAll();
    const stored = [...first, ...second].map((event, index) => ({ ...event, position: BigInt(index + 1) }));
    expect(events).toEqual(stored);
    expect(await log.readStream('toolcall-acme/t1')).toEqual(stored.slice(2));

    const next = await log.append('session-s1', [{ id: randomUUID(), type: 'chunk.text.delta', data: {} }], 1n);
    expect(next.events[0]).toMatchObject({ revision: 2n, position: 5n });
    expect(next.events[0].metadata.prevHash).toBe(first[1].metadata.hash);
    const conflict = log.append('session-s1', [{ id: randomUUID(), type: 'x', data: {} }], 1n);
    await expect(conflict).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    const retry = await log.append('session-s1', [{ ...oldEvents[1] }], 2n);
    expect(retry).toMatchObject({ appended: 0, duplicates: [oldEvents[1].id] });
  });
});
