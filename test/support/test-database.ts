import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { migrations, runMigrations } from '../../apps/ledger/src/database/migrations.js';

export interface TestDatabase {
  readonly connectionString: string;
  drop(): Promise<void>;
}

type Migration = (typeof migrations)[number];

/**
 * Every suite's database is a copy of this one, which the first suite to need it migrates, from the source as the
 * suites see it: a copy takes 40–60 ms, migrating an empty database 250–320 (decision 0059).
 */
const TEMPLATE = 'ledger_test_template';
/** Taken in the server's own database while a worker makes the template, so that one worker makes it. */
const TEMPLATE_LOCK = 7_318_201_059;
let templateMade: Promise<void> | undefined;

/**
 * Made once per run's PostgreSQL, then closed to connections (a copy fails while anyone is connected). A template
 * still open to connections was left half-made by a worker that died: it is made again.
 */
function migratedTemplate(serverUrl: string): Promise<void> {
  templateMade ??= withClient(serverUrl, async (admin) => {
    await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK]);
    const { rows } = await admin.query<{ datallowconn: boolean }>(
      'SELECT datallowconn FROM pg_database WHERE datname = $1',
      [TEMPLATE],
    );
    if (rows[0]?.datallowconn === false) return;
    if (rows[0]) await admin.query(`DROP DATABASE ${TEMPLATE} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${TEMPLATE}`);
    await runMigrations(databaseUrl(serverUrl, TEMPLATE));
    await admin.query(`ALTER DATABASE ${TEMPLATE} WITH ALLOW_CONNECTIONS false`);
  });
  return templateMade;
}

/**
 * A fresh, migrated database in the run's embedded PostgreSQL, so suites never see each other's events.
 * With `before`, it is migrated only up to that migration, as an older ledger left it.
 */
export async function createTestDatabase(options: { before?: Migration } = {}): Promise<TestDatabase> {
  const serverUrl = process.env.LEDGER_TEST_DATABASE_URL;
  if (!serverUrl)
    throw new Error('LEDGER_TEST_DATABASE_URL is not set: run the tests through jest (global-setup starts PostgreSQL)');
  const name = `test_${randomUUID().replaceAll('-', '')}`;
  const connectionString = databaseUrl(serverUrl, name);
  if (options.before) {
    await withClient(serverUrl, async (admin) => void (await admin.query(`CREATE DATABASE ${name}`)));
    await withMigrations(connectionString, migrations.slice(0, migrations.indexOf(options.before)), (dataSource) =>
      dataSource.runMigrations(),
    );
  } else {
    await migratedTemplate(serverUrl);
    await withClient(
      serverUrl,
      async (admin) => void (await admin.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`)),
    );
  }
  return {
    connectionString,
    drop: () => withClient(serverUrl, (admin) => dropDatabase(admin, name)),
  };
}

/**
 * Drops `name` once its connections have gone, forcing it after a few seconds. `pool.end()` resolves
 * before its clients' sockets close: a forced drop in that gap ends them with an error that no pool
 * listens for any more, which fails whichever test is running.
 */
export async function dropDatabase(admin: pg.Client, name: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  const connected = async () =>
    (await admin.query('SELECT 1 FROM pg_stat_activity WHERE datname = $1', [name])).rowCount !== 0;
  while (Date.now() < deadline && (await connected())) await new Promise((resolve) => setTimeout(resolve, 20));
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A client on `connectionString` for `work`, ended afterwards. */
export async function withClient<T>(connectionString: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function withMigrations<T>(
  connectionString: string,
  list: readonly Migration[],
  work: (dataSource: DataSource) => Promise<T>,
): Promise<T> {
  const dataSource = new DataSource({ type: 'postgres', url: connectionString, migrations: [...list], logging: false });
  await dataSource.initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Undoes the database's migrations from the last one back through the one named `name`, as an older
 * ledger would find the schema; `runMigrations` brings it up again.
 */
export async function undoMigrationsThrough(connectionString: string, name: string): Promise<void> {
  await withMigrations(connectionString, migrations, async (dataSource) => {
    const executed = async () =>
      (await dataSource.query<unknown[]>('SELECT 1 FROM migrations WHERE name = $1', [name])).length === 1;
    if (!(await executed())) throw new Error(`migration ${name} has not run here`);
    while (await executed()) await dataSource.undoLastMigration();
  });
}
