/**
 * Event-log append throughput: our PostgreSQL adapter (group commit) beside a naive baseline
 * (one INSERT per event on a bigserial, no grouping) and emmett-postgresql's event store, all on
 * the same database in the same run, plus our EventStoreDB adapter talking gRPC to the wire
 * double of test/ (that row measures our adapter and the client library, not a server). Each cell is the best of ROUNDS runs, engines interleaved,
 * because this 2-core machine is noisy: read the ratios, not the absolute numbers. The process
 * runs with the service's V8 flags (`SERVICE_NODE_FLAGS`), every engine alike. The last scenario
 * but one runs on a log that holds 10,000 sessions already (in ours, a stream and an envelope each), its
 * statistics current as autovacuum keeps them: a log past its first days. The last appends to one stream of
 * 20,000 events (a long agent session): an append must not cost its stream's length.
 *
 *   npm run bench:event-log
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { getPostgreSQLEventStore } from '@event-driven-io/emmett-postgresql';
import pg from 'pg';
import { ANY, createPostgresEventLog, type NewEvent } from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { startEventStoreDouble } from '../../test/support/eventstoredb-double/eventstoredb-double.js';
import {
  formatRate,
  formatRatio,
  openBenchDatabase,
  printTable,
  reranWithServiceNodeFlags,
} from '../support/bench-database.js';

interface Engine {
  readonly name: string;
  append(streamId: string, events: readonly NewEvent[]): Promise<unknown>;
  close(): Promise<void>;
}

interface Scenario {
  readonly name: string;
  readonly appenders: number;
  readonly appendsPerAppender: number;
  readonly eventsPerAppend: number;
  /**
   * Sessions every engine holds before this scenario starts, each a stream of one event with a correlation id of its
   * own; the scenario's events carry their session's too, as the service's do.
   */
  readonly sessionsBefore?: number;
  /** Events one stream of every engine holds before this scenario starts (a long session): its appends go to that stream. */
  readonly streamLengthBefore?: number;
}

const SCENARIOS: readonly Scenario[] = [
  { name: 'one event per append (sequential)', appenders: 1, appendsPerAppender: 1_000, eventsPerAppend: 1 },
  { name: 'batches of 100 (sequential)', appenders: 1, appendsPerAppender: 100, eventsPerAppend: 100 },
  { name: '64 concurrent single-event appenders', appenders: 64, appendsPerAppender: 100, eventsPerAppend: 1 },
  {
    name: 'one event per append, 10,000 sessions before',
    appenders: 1,
    appendsPerAppender: 1_000,
    eventsPerAppend: 1,
    sessionsBefore: 10_000,
  },
  {
    name: 'one event per append to a stream of 20,000 events',
    appenders: 1,
    appendsPerAppender: 1_000,
    eventsPerAppend: 1,
    streamLengthBefore: 20_000,
  },
];
/** Appenders that store the sessions a scenario wants before it. */
const SEEDING_APPENDERS = 64;
const ROUNDS = 2;

/** `session`: the correlation id the events carry, when the scenario has sessions. */
function chunkEvents(count: number, session?: string): NewEvent[] {
  return Array.from({ length: count }, (_, seq) => ({
    id: randomUUID(),
    type: 'chunk.text.delta',
    data: { seq, text: ' a few tokens' },
    ...(session ? { correlationId: session } : {}),
  }));
}

async function analyze(connectionString: string): Promise<void> {
  const sql = new pg.Client({ connectionString });
  await sql.connect();
  try {
    await sql.query('ANALYZE');
  } finally {
    await sql.end();
  }
}

/** Stores `count` sessions of one event each through the engine, several appenders at once. */
async function seedSessions(engine: Engine, count: number): Promise<void> {
  const run = randomUUID().slice(0, 8);
  let next = 0;
  await Promise.all(
    Array.from({ length: SEEDING_APPENDERS }, async () => {
      for (let index = next++; index < count; index = next++) {
        const session = `seeded-${run}-${index}`;
        await engine.append(session, chunkEvents(1, session));
      }
    }),
  );
}

/** Stores a stream of `length` events through the engine, in appends of 100, and names it. */
async function seedStream(engine: Engine, length: number): Promise<string> {
  const stream = `long-${randomUUID().slice(0, 8)}`;
  for (let stored = 0; stored < length; stored += 100) await engine.append(stream, chunkEvents(100));
  return stream;
}

/** A baseline's pool; an idle connection PostgreSQL ends as the bench stops it is no failure of the run. */
function baselinePool(connectionString: string): pg.Pool {
  const pool = new pg.Pool({ connectionString, max: 16 });
  pool.on('error', (error) => console.error(`a baseline's idle connection ended: ${error.message}`));
  return pool;
}

async function naiveEngine(connectionString: string): Promise<Engine> {
  const pool = baselinePool(connectionString);
  await pool.query(`CREATE TABLE IF NOT EXISTS bench_naive_events (
    position bigserial PRIMARY KEY, stream_id text NOT NULL, event_id uuid NOT NULL, type text NOT NULL, data jsonb NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now())`);
  const insert = 'INSERT INTO bench_naive_events (stream_id, event_id, type, data) VALUES ($1, $2, $3, $4)';
  return {
    name: 'naive INSERT per event',
    async append(streamId, events) {
      if (events.length === 1)
        return pool.query(insert, [streamId, events[0].id, events[0].type, JSON.stringify(events[0].data)]);
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        for (const event of events)
          await client.query(insert, [streamId, event.id, event.type, JSON.stringify(event.data)]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

async function emmettEngine(connectionString: string): Promise<Engine> {
  // Emmett gets a pool we own, so that closing it is ours to do before PostgreSQL stops.
  const pool = baselinePool(connectionString);
  const store = getPostgreSQLEventStore(connectionString, { connectionOptions: { pool } });
  return {
    name: 'emmett-postgresql',
    append: (streamId, events) =>
      store.appendToStream(
        streamId,
        events.map((event) => ({ type: event.type, data: event.data as Record<string, unknown> })),
      ),
    close: async () => {
      await store.close();
      await pool.end();
    },
  };
}

async function ourEngine(connectionString: string): Promise<Engine> {
  const log = await createPostgresEventLog({ connectionString });
  return {
    name: 'block-ledger PostgreSQL (group commit)',
    append: (streamId, events) => log.append(streamId, events, ANY),
    close: () => log.close(),
  };
}

async function eventStoreDbEngine(): Promise<Engine> {
  const double = await startEventStoreDouble();
  const log = createEventStoreDbEventLog({ connectionString: double.connectionString });
  return {
    name: 'EventStoreDB adapter + client → gRPC double',
    append: (streamId, events) => log.append(streamId, events, ANY),
    close: async () => {
      await log.close();
      await double.stop();
    },
  };
}

/** `stream`: the one stream every append goes to, instead of a new one per appender. */
async function measure(engine: Engine, scenario: Scenario, stream?: string): Promise<number> {
  const run = randomUUID().slice(0, 8);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: scenario.appenders }, async (_, appender) => {
      for (let append = 0; append < scenario.appendsPerAppender; append += 1) {
        const session = stream ?? `session-${run}-${appender}`;
        await engine.append(
          session,
          chunkEvents(scenario.eventsPerAppend, scenario.sessionsBefore ? session : undefined),
        );
      }
    }),
  );
  const seconds = (performance.now() - started) / 1_000;
  return (scenario.appenders * scenario.appendsPerAppender * scenario.eventsPerAppend) / seconds;
}

async function main(): Promise<void> {
  const database = await openBenchDatabase();
  const engines = [
    await ourEngine(database.connectionString),
    await naiveEngine(database.connectionString),
    await emmettEngine(database.connectionString),
    await eventStoreDbEngine(),
  ];
  try {
    console.log(
      `event-log append throughput, events/s (best of ${ROUNDS}); ${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
    );
    const rows: string[][] = [];
    for (const scenario of SCENARIOS) {
      if (scenario.sessionsBefore) {
        for (const engine of engines) await seedSessions(engine, scenario.sessionsBefore);
        await analyze(database.connectionString);
      }
      const streams = new Map<Engine, string>();
      if (scenario.streamLengthBefore) {
        for (const engine of engines) streams.set(engine, await seedStream(engine, scenario.streamLengthBefore));
      }
      const best = new Map<string, number>();
      for (let round = 0; round < ROUNDS; round += 1) {
        for (const engine of round % 2 === 0 ? engines : [...engines].reverse()) {
          const rate = await measure(engine, scenario, streams.get(engine));
          best.set(engine.name, Math.max(best.get(engine.name) ?? 0, rate));
        }
      }
      const [ours, naive, emmett, eventStoreDb] = engines.map((engine) => best.get(engine.name)!);
      rows.push([
        scenario.name,
        ...[ours, naive, emmett, eventStoreDb].map(formatRate),
        formatRatio(ours / naive),
        formatRatio(ours / emmett),
      ]);
    }
    printTable(
      ['scenario', ...engines.map((engine) => engine.name), 'PostgreSQL ours / naive', 'PostgreSQL ours / emmett'],
      rows,
    );
  } finally {
    for (const engine of engines) await engine.close();
    await database.close();
  }
}

if (!(await reranWithServiceNodeFlags())) await main();
