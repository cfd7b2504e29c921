import type { INestApplication } from '@nestjs/common';
import { Logger } from 'nestjs-pino';
import { pino } from 'pino';
import type { LedgerConfig } from './config/ledger-config.js';
import { connectRetry, openDatabase, waitForEventStore } from './config/startup-checks.js';
import { StartupError } from './database/embedded-postgres.js';
import { runMigrations } from './database/migrations.js';
import { createLedgerApp } from './ledger-app.js';

const SHUTDOWN_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * Starts the service on a configuration whose files `main` has checked: the database (embedded, or the one
 * `DATABASE_URL` names once it answers), its migrations, then the app on `PORT`. SIGINT and SIGTERM close the
 * app, then stop the embedded PostgreSQL.
 */
export async function serve(config: LedgerConfig): Promise<void> {
  const retry = connectRetry(config.connectRetryMs, pino({ level: config.logLevel }));
  const database = await openDatabase(config, retry);

  // embedded-postgres installs its own signal hooks that stop the server and exit at once;
  // ours close the HTTP server and the log first, then stop PostgreSQL. SIGHUP stops nothing: it
  // reloads what the service reloads (the gateway's upstreams file), and is otherwise ignored.
  for (const signal of [...SHUTDOWN_SIGNALS, 'SIGHUP'] as const) process.removeAllListeners(signal);
  process.on('SIGHUP', () => undefined);

  let app: INestApplication | undefined;
  const shutdown = async (signal: string) => {
    console.error(`block-ledger: ${signal} received, shutting down`);
    await app
      ?.close()
      .catch((error: Error) => console.error(`block-ledger: closing the service failed: ${error.message}`));
    await database.stop();
    process.exit(0);
  };
  for (const signal of SHUTDOWN_SIGNALS) process.once(signal, (received) => void shutdown(received));

  try {
    if (config.eventStoreConnectionString) await waitForEventStore(config.eventStoreConnectionString, retry);
    await runMigrations(database.connectionString);
    app = await createLedgerApp({ config, connectionString: database.connectionString });
    await app.listen(config.port).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'EADDRINUSE' || error.code === 'EACCES'
        ? new StartupError(`port ${config.port} is not available (${error.code}); set PORT to a free port`)
        : error;
    });
    app
      .get(Logger)
      .log(
        `listening on http://localhost:${config.port} (database: ${config.databaseUrl ? 'DATABASE_URL' : `embedded in ${config.dataDir}`})`,
      );
  } catch (error) {
    await app?.close().catch(() => undefined);
    await database.stop();
    throw error;
  }
}
