import type pg from 'pg';

/** Where each statement comes from, by what it touches; first match wins. */
const STATEMENT_SOURCES: readonly (readonly [string, RegExp])[] = [
  ['identity: API key store', /api_keys/],
  ['consumers: leadership lock', /pg_(try_)?advisory_(un)?lock/],
  // A consumer's batch carries the checkpoint's move (decision 0052): named by what else it writes.
  ['Merkle log consumer', /log_leaves|log_nodes|log_checkpoints/],
  ['governance saga store', /governance_saga_open/],
  ['tool-call read model', /tool_calls/],
  ['block read models (writes, and reads of them)', /message_blocks|MessageBlockRow|messages|sessions/],
  ['consumers: checkpoint alone', /projection_checkpoints/],
  ['event log: group commit', /event_log_append|event_log_streams|FOR UPDATE|pg_advisory_xact_lock/],
  ['event log: reads (shared feed, session tails)', /event_log_events|event_log_head/],
  ['transaction control (projections, fallback commit)', /^(BEGIN|COMMIT|ROLLBACK|SET TRANSACTION)/i],
];

const IN_THIS_DATABASE = '(SELECT oid FROM pg_database WHERE datname = current_database())';

export interface PostgresCounters {
  readonly transactions: number;
  readonly fetched: number;
  /** Undefined when pg_stat_statements is not loaded (a DATABASE_URL server without it). */
  readonly statements: number | undefined;
}

/**
 * What this database has committed and fetched, and the statements it has run when `pg_stat_statements` is
 * loaded. Backends report their counters when idle, at most once a second: this waits for them first.
 */
export async function postgresCounters(sql: pg.ClientBase, statementsLoaded: boolean): Promise<PostgresCounters> {
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await sql.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await sql.query<{ xact_commit: string; tup_fetched: string }>(
    'SELECT xact_commit, tup_fetched FROM pg_stat_database WHERE datname = current_database()',
  );
  const statements = statementsLoaded ? await statementCount(sql) : undefined;
  return { transactions: Number(rows[0].xact_commit), fetched: Number(rows[0].tup_fetched), statements };
}

/** Whether `pg_stat_statements` answers here: the bench's embedded server loads it when asked (`countStatements`). */
export function statementsCounted(sql: pg.ClientBase): Promise<boolean> {
  return sql
    .query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
    .then(() => sql.query('SELECT 1 FROM pg_stat_statements LIMIT 1'))
    .then(
      () => true,
      () => false,
    );
}

/** Statements this database has run since `pg_stat_statements` was last reset (it counts the whole cluster). */
async function statementCount(sql: pg.ClientBase): Promise<number> {
  const { rows } = await sql.query<{ calls: string }>(
    `SELECT coalesce(sum(calls), 0) AS calls FROM pg_stat_statements WHERE dbid = ${IN_THIS_DATABASE}`,
  );
  return Number(rows[0].calls);
}

/**
 * The statements run at least `minPerUnit` times per unit (a POST, a governed call) since the last reset, most
 * first, as table rows: calls per unit, where the statement comes from, its first 90 characters.
 */
export async function statementsPerUnit(sql: pg.ClientBase, units: number, minPerUnit: number): Promise<string[][]> {
  const { rows } = await sql.query<{ calls: string; query: string }>(
    `SELECT calls, query FROM pg_stat_statements WHERE dbid = ${IN_THIS_DATABASE} AND calls >= $1 ORDER BY calls DESC`,
    [Math.ceil(units * minPerUnit)],
  );
  return rows.map((row) => {
    const query = row.query.replace(/\s+/g, ' ').trim();
    const source = STATEMENT_SOURCES.find(([, pattern]) => pattern.test(query))?.[0] ?? 'other';
    return [(Number(row.calls) / units).toFixed(2), source, query.slice(0, 90).replaceAll('|', '\\|')];
  });
}
