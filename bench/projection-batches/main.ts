/**
 * What committing a projection's batch costs the runner, in its two forms (decision 0052), in the same run:
 * the batch's statement with the checkpoint's move inside it (one statement, one round trip), against the same
 * statement in a transaction with the checkpoint moved by its own UPDATE (BEGIN, statement, UPDATE, COMMIT).
 * One appender, one event per append, each awaited until the runner has committed it: every batch holds one
 * event, as when one producer or one governed call drives the consumers. Rounds alternate the forms.
 * Per batch: wall time (append included), this process's CPU (the appender and the runner), PostgreSQL's CPU,
 * and PostgreSQL's statements (the append's included).
 *
 *   npm run bench:projection-batches        BENCH_EVENTS=2000 BENCH_ROUNDS=3 by default
 */
import { randomUUID } from 'node:crypto';
import { ANY, createPostgresEventLog, type EventLog, type RecordedEvent } from '#event-log';
import pg from 'pg';
import { handleBatch, type ProjectionDefinition } from '../../apps/ledger/src/projections/projection.js';
import { ProjectionRunner } from '../../apps/ledger/src/projections/projection-runner.js';
import { formatRatio, openBenchDatabase, percentile, printTable } from '../support/bench-database.js';
import { postmasterPid, processTreeTicks, ticksToMs } from '../support/process-cpu.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** A projection keeping the last event of each of 50 rows, as a read model upserts its rows guarded by position. */
function statementForm(name: string): ProjectionDefinition {
  return {
    name,
    version: 1,
    filter: { streamPrefixes: ['bench-'] },
    reset: () => undefined,
    writes: (events) =>
      Promise.resolve({
        name: 'bench-projection-write',
        text: `INSERT INTO bench_rows (name, id, data, position)
               SELECT $1, r.id, r.data, r.position FROM jsonb_to_recordset($2::jsonb) AS r(id int, data jsonb, position bigint)
               ON CONFLICT (name, id) DO UPDATE SET data = excluded.data, position = excluded.position
               WHERE bench_rows.position <= excluded.position`,
        values: [name, JSON.stringify([...lastPerRow(events).values()])],
      }),
  };
}

/** Each row written once per batch, as of its last event there. */
function lastPerRow(events: readonly RecordedEvent[]) {
  const rows = new Map<number, { id: number; data: unknown; position: string }>();
  for (const event of events) {
    const id = Number(event.position % 50n);
    rows.set(id, { id, data: event.data, position: event.position.toString() });
  }
  return rows;
}

/** The same projection as the runner took every projection before: its statement in the batch's transaction. */
function transactionForm(name: string): ProjectionDefinition {
  const statement = statementForm(name);
  return { ...statement, writes: undefined, handle: (events, context) => handleBatch(statement, events, context) };
}

interface Round {
  readonly wallMs: number;
  readonly nodeMs: number;
  readonly postgresMs: number;
  readonly statements: number;
}

async function statementsSoFar(sql: pg.Pool): Promise<number> {
  const { rows } = await sql.query<{ calls: string }>(
    `SELECT coalesce(sum(calls), 0) AS calls FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  return Number(rows[0].calls);
}

async function round(
  pool: pg.Pool,
  sql: pg.Pool,
  eventLog: EventLog,
  definition: ProjectionDefinition,
  postmaster: number,
): Promise<Round> {
  const runner = new ProjectionRunner(pool, eventLog, definition, {
    onError: (error) => console.error(`${definition.name}:`, error.message),
  });
  // From the log's head: the rounds before are not this runner's.
  await runner.createCheckpointAt(await eventLog.headPosition());
  runner.start();
  const stream = `bench-${randomUUID()}`;
  const text = 'a few tokens of a streamed answer '.repeat(6);
  const appendAndWait = async () => {
    const { position } = await eventLog.append(
      stream,
      [{ id: randomUUID(), type: 'bench.delta', data: { text } }],
      ANY,
    );
    if (!(await runner.waitForPosition(position, 10_000)))
      throw new Error(`${definition.name} did not reach ${position}`);
  };
  try {
    for (let index = 0; index < 100; index += 1) await appendAndWait();
    const statementsBefore = await statementsSoFar(sql);
    const cpu = process.cpuUsage();
    const postgresBefore = await processTreeTicks(postmaster);
    const started = performance.now();
    for (let index = 0; index < EVENTS; index += 1) await appendAndWait();
    const wallMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const postgresMs = ticksToMs((await processTreeTicks(postmaster)) - postgresBefore);
    // The two reads of pg_stat_statements themselves are not the runner's.
    const statements = (await statementsSoFar(sql)) - statementsBefore - 1;
    return { wallMs, nodeMs: (used.user + used.system) / 1_000, postgresMs, statements };
  } finally {
    await runner.stop();
  }
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_396, { countStatements: true });
  const sql = new pg.Pool({ connectionString: database.connectionString, max: 1 });
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 2 });
  const eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
  try {
    await sql.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await sql.query('CREATE TABLE bench_rows (name text, id int, data jsonb, position bigint, PRIMARY KEY (name, id))');
    const postmaster = await postmasterPid(sql);
    const measured = { statement: [] as Round[], transaction: [] as Round[] };
    for (let index = 0; index < ROUNDS; index += 1) {
      measured.transaction.push(await round(pool, sql, eventLog, transactionForm(`transaction-${index}`), postmaster));
      measured.statement.push(await round(pool, sql, eventLog, statementForm(`statement-${index}`), postmaster));
    }
    const perBatch = (form: Round[], key: keyof Round) =>
      percentile(
        form.map((measure) => measure[key] / EVENTS),
        50,
      );
    const rowFor = (label: string, key: keyof Round, unit: (value: number) => string) => {
      const transaction = perBatch(measured.transaction, key);
      const statement = perBatch(measured.statement, key);
      return [label, unit(transaction), unit(statement), formatRatio(statement / transaction)];
    };
    const micros = (ms: number) => `${Math.round(ms * 1_000)}`;
    console.log(`${EVENTS} single-event batches per round, ${ROUNDS} rounds per form, medians of the rounds`);
    printTable(
      ['per batch (append included)', 'transaction (before)', 'one statement', 'one statement / transaction'],
      [
        rowFor('wall time, µs', 'wallMs', micros),
        rowFor('this process CPU, µs', 'nodeMs', micros),
        rowFor('PostgreSQL CPU, µs', 'postgresMs', micros),
        rowFor('statements', 'statements', (value) => value.toFixed(2)),
      ],
    );
  } finally {
    await eventLog.close();
    await pool.end();
    await sql.end();
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
