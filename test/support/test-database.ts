import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { runMigrations } from '../../apps/ledger/src/database/migrations.js';

export interface TestDatabase {
  readonly connectionString: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database in the run's embedded PostgreSQL, so suites never see each other's events. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.LEDGER_TEST_DATABASE_URL;
  if (!serverUrl)
    throw new Error('LEDGER_TEST_DATABASE_URL is not set: run the tests through jest (global-setup starts PostgreSQL)');
  const name = `test_${randomUUID().replaceAll('-', '')}`;
  await withAdmin(serverUrl, async (admin) => void (await admin.query(`CREATE DATABASE ${name}`)));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const connectionString = url.toString();
  await runMigrations(connectionString);
  return {
    connectionString,
    drop: () =>
      withAdmin(serverUrl, async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))),
  };
}

async function withAdmin<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}
