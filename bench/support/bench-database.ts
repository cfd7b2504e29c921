import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createPostgresEventLog } from '#event-log';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../apps/ledger/src/database/embedded-postgres.js';
import { SERVICE_NODE_FLAGS } from '../../apps/ledger/src/config/node-flags.js';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';
import { ApiKeyStore } from '../../apps/ledger/src/identity/api-key-store.js';
import { systemActor, type Role } from '../../apps/ledger/src/identity/principal.js';

export interface BenchDatabase {
  readonly connectionString: string;
  close(): Promise<void>;
}

/**
 * For a bench that runs the service's code in its own process (the rebuild, the event log): true
 * when this process lacks the service's V8 flags and has run itself again with them, so the caller
 * measures nothing itself. The run's exit code (or signal) is this process's; SIGINT and SIGTERM
 * are passed on to it. Every engine of the run gets the flags.
 */
export async function reranWithServiceNodeFlags(): Promise<boolean> {
  if (SERVICE_NODE_FLAGS.every((flag) => process.execArgv.includes(flag))) return false;
  // A debugger's port is this process's: the run gets none.
  const inherited = process.execArgv.filter((flag) => !flag.startsWith('--inspect'));
  const run = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...inherited, ...process.argv.slice(1)], {
    stdio: 'inherit',
  });
  const passOn = (signal: NodeJS.Signals) => run.kill(signal);
  process.on('SIGINT', passOn).on('SIGTERM', passOn);
  const [code, signal] = (await once(run, 'exit')) as [number | null, NodeJS.Signals | null];
  process.off('SIGINT', passOn).off('SIGTERM', passOn);
  if (signal) process.kill(process.pid, signal);
  process.exitCode = code ?? 1;
  return true;
}

/**
 * `DATABASE_URL` when set (it must be a scratch database), else a throwaway embedded PostgreSQL,
 * loading `pg_stat_statements` when asked (to count statements per request). Migrated either way.
 */
export async function openBenchDatabase(
  port = 54_390,
  options: { countStatements?: boolean } = {},
): Promise<BenchDatabase> {
  if (process.env.DATABASE_URL) {
    await runMigrations(process.env.DATABASE_URL);
    return { connectionString: process.env.DATABASE_URL, close: () => Promise.resolve() };
  }
  const folder = await mkdtemp(path.join(tmpdir(), 'block-ledger-bench-'));
  await chmod(folder, 0o755);
  const database = await startEmbeddedPostgres({
    dataDir: path.join(folder, 'postgres'),
    port,
    postgresFlags: options.countStatements ? ['-c', 'shared_preload_libraries=pg_stat_statements'] : [],
  });
  await runMigrations(database.connectionString);
  return {
    connectionString: database.connectionString,
    close: async () => {
      await database.stop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/** Prints a Markdown table; the first numeric column is what the ratio columns compare against. */
export function printTable(headers: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column].length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, column) => cell.padEnd(widths[column])).join(' | ')} |`;
  console.log(line(headers));
  console.log(`| ${widths.map((width) => '-'.repeat(width)).join(' | ')} |`);
  for (const row of rows) console.log(line(row));
}

export const formatRate = (perSecond: number) => Math.round(perSecond).toLocaleString('en-US');
export const formatRatio = (ratio: number) => `${ratio.toFixed(1)}×`;

export const percentile = (values: readonly number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))];

/**
 * API keys of tenant `default` made by the service's own store on the bench database (as
 * `npm run keys -- create` does), one per name. Made before the service starts, they also keep it
 * from writing a bootstrap admin key into the working folder.
 */
export async function mintBenchKeys(
  connectionString: string,
  keys: readonly { name: string; roles: readonly Role[] }[],
): Promise<string[]> {
  const pool = new pg.Pool({ connectionString, max: 2 });
  const eventLog = await createPostgresEventLog({ connectionString });
  try {
    const store = new ApiKeyStore(pool, eventLog);
    const minted: string[] = [];
    for (const { name, roles } of keys) {
      minted.push((await store.create({ name, tenant: 'default', roles }, systemActor('bench'))).key);
    }
    return minted;
  } finally {
    await eventLog.close();
    await pool.end();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A service process a bench started. */
export interface LedgerProcess {
  readonly url: string;
  readonly pid: number;
  /** Has the service run a full garbage collection (a signal to its preloaded handler), then lets it settle. */
  collectGarbage(): Promise<void>;
  stop(): Promise<void>;
}

/** Long enough for a full collection of the service's heap (a few hundred MiB at most in these benches). */
const GARBAGE_COLLECTION_SETTLE_MS = 500;
/** What the service process preloads: SIGUSR2 collects its garbage (for a bench reading its heap). */
const COLLECT_ON_SIGNAL = [
  '--expose-gc',
  '--import',
  pathToFileURL(path.resolve('dist/bench/support/collect-garbage-on-signal.js')).href,
];

/** The built service as its own process (as deployed: `npm start`'s flags, plus COLLECT_ON_SIGNAL), on the bench database. */
export async function startLedgerProcess(
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<LedgerProcess> {
  const port = await freePort();
  // A data folder of its own: the service generates its checkpoint signing key there.
  const dataDir = await mkdtemp(path.join(tmpdir(), 'block-ledger-bench-data-'));
  // BENCH_CPU_PROF_DIR: the service writes a V8 CPU profile there when it stops (see profile-breakdown.ts).
  const profile = process.env.BENCH_CPU_PROF_DIR
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`]
    : [];
  const child = spawn(
    process.execPath,
    [...profile, ...SERVICE_NODE_FLAGS, ...COLLECT_ON_SIGNAL, path.resolve('dist/apps/ledger/src/main.js')],
    {
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        PORT: String(port),
        LOG_LEVEL: 'warn',
        LEDGER_DATA_DIR: dataDir,
        ...env,
      },
      stdio: 'inherit',
    },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 300; attempt += 1) {
    if ((await fetch(`${url}/health`).catch(() => undefined))?.ok) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url,
    pid: child.pid!,
    collectGarbage: async () => {
      child.kill('SIGUSR2');
      await new Promise((resolve) => setTimeout(resolve, GARBAGE_COLLECTION_SETTLE_MS));
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
