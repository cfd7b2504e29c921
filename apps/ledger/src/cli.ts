import path from 'node:path';
import { createEventStoreDbEventLog, createPostgresEventLog } from '#event-log';
import pg from 'pg';
import { loadConfig } from './config/ledger-config.js';
import { startEmbeddedPostgres, StartupError, type EmbeddedDatabase } from './database/embedded-postgres.js';
import { runMigrations } from './database/migrations.js';
import { rebuildReadModels } from './projections/read-model-projections.js';

/**
 * The ledger's command line, on the same configuration as the service:
 *   node dist/apps/ledger/src/cli.js rebuild    rebuild the read models from the log and swap them in
 * It can run beside a running service: it reuses the embedded server on the same data folder, and
 * waits for a rebuild the service is running to finish (one at a time, decision 0012).
 */
async function main(command: string | undefined): Promise<void> {
  if (command !== 'rebuild') throw new StartupError('usage: cli.js rebuild');
  const config = loadConfig(process.env);
  const database: EmbeddedDatabase = config.databaseUrl
    ? { connectionString: config.databaseUrl, adopted: true, stop: async () => undefined }
    : await startEmbeddedPostgres({ dataDir: path.join(config.dataDir, 'postgres'), port: config.embeddedPostgresPort });
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 4 });
  const eventLog = config.eventStoreConnectionString
    ? createEventStoreDbEventLog({ connectionString: config.eventStoreConnectionString })
    : await createPostgresEventLog({ connectionString: database.connectionString });
  try {
    await runMigrations(database.connectionString);
    for (const { name, result } of await rebuildReadModels(pool, eventLog)) {
      console.log(JSON.stringify({ rebuilt: name, events: result.events, position: Number(result.position), durationMs: Math.round(result.durationMs) }));
    }
  } finally {
    await eventLog.close();
    await pool.end();
    if (!database.adopted) await database.stop();
  }
}

main(process.argv[2]).catch((error: unknown) => {
  console.error(error instanceof StartupError ? `block-ledger: ${error.message}` : error);
  process.exit(1);
});
