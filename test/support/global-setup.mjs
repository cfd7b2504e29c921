import process from 'node:process';
// Jest loads global setup outside its transform, so this reuses the built service code
// (`npm test` builds first): one real PostgreSQL for the whole run, each suite then makes its own
// database in it (test-database.ts).
import { chmod, mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../dist/apps/ledger/src/database/embedded-postgres.js';
import { removeAbandonedTestFolders, TEST_FOLDER_PREFIX } from './abandoned-test-folders.mjs';

export default async function globalSetup() {
  await removeAbandonedTestFolders(tmpdir());
  const folder = await mkdtemp(path.join(tmpdir(), TEST_FOLDER_PREFIX));
  // As root, PostgreSQL runs as the postgres user, who must be able to reach the data folder.
  await chmod(folder, 0o755);
  const dataDir = path.join(folder, 'postgres');
  // The run's cluster is thrown away at its end and no test crashes the machine under it: flushing each commit to
  // disk buys nothing here and cost the write-heavy suites a third of their time (decision 0069).
  const database = await startEmbeddedPostgres({ dataDir, port: await freePort(), postgresFlags: ['-c', 'fsync=off'] });
  process.env.LEDGER_TEST_DATABASE_URL = database.connectionString;
  globalThis.__ledgerTestDatabase = { database, dataDir };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
