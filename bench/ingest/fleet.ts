import { spawn } from 'node:child_process';
import path from 'node:path';
import type pg from 'pg';
import { formatRate, formatRatio, percentile, printTable } from '../support/bench-database.js';
import { corePercent, parentPid, processTicks, processTreeTicks } from '../support/process-cpu.js';
import type { FleetConfig, FleetResult } from './fleet-process.js';

const FLEET_SIZES = (process.env.BENCH_FLEET_SIZES ?? '100,250,500').split(',').map(Number);
const FLEET_SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 15);
/** A model streaming about 40 tokens a second, a delta per token. */
const CHUNKS_PER_SECOND = 40;
const TOP_STATEMENTS = 8;

interface Counters {
  readonly transactions: number;
  readonly fetched: number;
  /** Undefined when pg_stat_statements is not loaded (a DATABASE_URL server without it). */
  readonly statements: number | undefined;
}

interface Measured {
  readonly fleet: FleetResult;
  readonly serviceCpu: number;
  readonly postgresCpu: number;
  readonly perPost: { transactions: number; fetched: number; statements: number | undefined };
}

async function counters(sql: pg.Client, statementsLoaded: boolean): Promise<Counters> {
  // Backends report their counters when idle (at most once a second): let them.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  await sql.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await sql.query<{ xact_commit: string; tup_fetched: string }>(
    'SELECT xact_commit, tup_fetched FROM pg_stat_database WHERE datname = current_database()',
  );
  const statements = statementsLoaded
    ? Number(
        (
          await sql.query<{ calls: string }>(
            `SELECT coalesce(sum(calls), 0) AS calls FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          )
        ).rows[0].calls,
      )
    : undefined;
  return { transactions: Number(rows[0].xact_commit), fetched: Number(rows[0].tup_fetched), statements };
}

function runFleetProcess(config: FleetConfig): Promise<FleetResult> {
  const child = spawn(process.execPath, [path.resolve('dist/bench/ingest/fleet-process.js'), JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (part: Buffer) => (output += part.toString()));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(output) as FleetResult) : reject(new Error(`fleet process exited ${code}`)),
    ),
  );
}

async function measure(
  sql: pg.Client,
  statementsLoaded: boolean,
  pids: { services: readonly number[]; postgres: number },
  config: FleetConfig,
): Promise<Measured> {
  const servicesTicks = async () =>
    (await Promise.all(pids.services.map((pid) => processTicks(pid)))).reduce((sum, ticks) => sum + ticks, 0);
  const before = await counters(sql, statementsLoaded);
  const serviceTicks = await servicesTicks();
  const postgresTicks = await processTreeTicks(pids.postgres);
  const started = performance.now();
  const fleet = await runFleetProcess(config);
  for (const error of fleet.errors) console.error(`${config.target} fleet of ${config.sessions}: ${error}`);
  const wallMs = performance.now() - started;
  const serviceCpu = corePercent((await servicesTicks()) - serviceTicks, wallMs);
  const postgresCpu = corePercent((await processTreeTicks(pids.postgres)) - postgresTicks, wallMs);
  const after = await counters(sql, statementsLoaded);
  const posts = fleet.chunkPosts + fleet.setupPosts;
  return {
    fleet,
    serviceCpu,
    postgresCpu,
    perPost: {
      transactions: (after.transactions - before.transactions) / posts,
      fetched: (after.fetched - before.fetched) / posts,
      statements: after.statements === undefined ? undefined : (after.statements - before.statements!) / posts,
    },
  };
}

const pair = (values: readonly number[]) =>
  values.length === 0 ? '—' : `${percentile(values, 50).toFixed(1)} / ${percentile(values, 99).toFixed(1)}`;

/**
 * Each fleet size against both services, then which statements the ledger ran per POST at the
 * largest. With `secondLedger` (another instance on the same database), the ledger's fleet also
 * runs against both instances at once, sessions split between them, in the same run.
 */
export async function runFleetComparison(options: {
  sql: pg.Client;
  ledger: { url: string; pid: number };
  secondLedger?: { url: string; pid: number };
  naive: { url: string };
  keys: readonly string[];
}): Promise<{ ledgerChunks: number }> {
  const { sql, ledger, secondLedger, naive, keys } = options;
  const statementsLoaded = await sql
    .query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
    .then(() => sql.query('SELECT 1 FROM pg_stat_statements LIMIT 1'))
    .then(
      () => true,
      () => false,
    );
  const { rows } = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const postgres = (await parentPid(rows[0].pid))!;
  const table: string[][] = [];
  let ledgerChunks = 0;
  for (const sessions of FLEET_SIZES) {
    const shape = { sessions, durationMs: FLEET_SECONDS * 1_000, chunksPerSecond: CHUNKS_PER_SECOND };
    if (statementsLoaded) await sql.query('SELECT pg_stat_statements_reset()');
    const ledgerRun = { target: 'ledger', keys, ...shape } as const;
    const ours = await measure(
      sql,
      statementsLoaded,
      { services: [ledger.pid], postgres },
      {
        ...ledgerRun,
        urls: [ledger.url],
      },
    );
    ledgerChunks += ours.fleet.acknowledgedChunks;
    const statementsPerPost = statementsLoaded ? await topStatements(sql, ours) : [];
    const twoInstances = secondLedger
      ? await measure(
          sql,
          statementsLoaded,
          { services: [ledger.pid, secondLedger.pid], postgres },
          {
            ...ledgerRun,
            urls: [ledger.url, secondLedger.url],
          },
        )
      : undefined;
    ledgerChunks += twoInstances?.fleet.acknowledgedChunks ?? 0;
    // The naive service runs in the bench's own process: its CPU is not the service's column.
    const baseline = await measure(
      sql,
      statementsLoaded,
      { services: [process.pid], postgres },
      {
        target: 'naive',
        urls: [naive.url],
        keys: [],
        ...shape,
      },
    );
    const runs: [string, Measured][] = [['block-ledger', ours]];
    if (twoInstances) runs.push(['block-ledger, 2 processes', twoInstances]);
    runs.push(['naive service', baseline]);
    for (const [name, run] of runs) {
      // Offered over the run's window; acknowledged over the run until its last answer.
      const seconds = run.fleet.elapsedMs / 1_000;
      table.push([
        String(sessions),
        name,
        formatRate(run.fleet.offeredChunks / FLEET_SECONDS),
        formatRate(run.fleet.acknowledgedChunks / seconds),
        formatRatio(
          run.fleet.acknowledgedChunks /
            seconds /
            (baseline.fleet.acknowledgedChunks / (baseline.fleet.elapsedMs / 1_000)),
        ),
        pair(run.fleet.ackMs),
        pair(run.fleet.projectionLagMs),
        pair(run.fleet.liveLagMs),
        `${run.serviceCpu.toFixed(0)} / ${run.postgresCpu.toFixed(0)}`,
        `${run.perPost.transactions.toFixed(2)} / ${run.perPost.statements?.toFixed(2) ?? 'n/a'} / ${run.perPost.fetched.toFixed(1)}`,
        String(run.fleet.failures),
      ]);
    }
    if (sessions === Math.max(...FLEET_SIZES) && statementsPerPost.length > 0) {
      console.log(
        `statements per POST, block-ledger fleet of ${sessions} (pg_stat_statements, top ${TOP_STATEMENTS}):`,
      );
      printTable(['calls / POST', 'statement'], statementsPerPost);
      console.log();
    }
  }
  console.log(
    `open-loop fleet: ${FLEET_SECONDS} s per run, ~400-chunk messages at ~${CHUNKS_PER_SECOND} chunks/s per session, ` +
      'a POST every 50–100 ms; a new session when one ends',
  );
  printTable(
    [
      'sessions',
      'service',
      'offered chunks/s',
      'acknowledged chunks/s',
      'ack vs naive',
      'ack p50 / p99 ms',
      'projection lag p50 / p99 ms',
      'live lag p50 / p99 ms',
      'CPU % service / PostgreSQL',
      'per POST: transactions / statements / tuples fetched',
      'failures',
    ],
    table,
  );
  return { ledgerChunks };
}

async function topStatements(sql: pg.Client, run: Measured): Promise<string[][]> {
  const posts = run.fleet.chunkPosts + run.fleet.setupPosts;
  const { rows } = await sql.query<{ calls: string; query: string }>(
    `SELECT calls, query FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY calls DESC LIMIT $1`,
    [TOP_STATEMENTS],
  );
  return rows.map((row) => [
    (Number(row.calls) / posts).toFixed(2),
    row.query.replace(/\s+/g, ' ').slice(0, 100).replaceAll('|', '\\|'),
  ]);
}
