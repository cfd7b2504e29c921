import path from 'node:path';
import { z } from 'zod';
import { StartupError } from '../database/embedded-postgres.js';

const port = (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback);

const environment = z.object({
  PORT: port(3000),
  DATABASE_URL: z.string().url().optional(),
  EVENTSTORE_CONNECTION_STRING: z.string().regex(/^esdb(\+discover)?:\/\//, 'must be an esdb:// connection string').optional(),
  LEDGER_DATA_DIR: z.string().min(1).default('.data'),
  LEDGER_PG_PORT: port(54_329),
  LEDGER_MAX_BODY_BYTES: z.coerce.number().int().min(1_024).default(1_048_576),
  LEDGER_LIVE_COALESCE_MS: z.coerce.number().int().min(0).max(10_000).default(50),
  LEDGER_LIVE_HEARTBEAT_MS: z.coerce.number().int().min(100).default(15_000),
  LEDGER_LIVE_MAX_BUFFERED_BYTES: z.coerce.number().int().min(1_024).default(1_048_576),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface LedgerConfig {
  readonly port: number;
  /** Set: use that PostgreSQL. Unset: start the embedded one under `dataDir`. */
  readonly databaseUrl: string | undefined;
  /** Set: the event log lives in EventStoreDB; PostgreSQL then holds only read models. */
  readonly eventStoreConnectionString: string | undefined;
  readonly dataDir: string;
  readonly embeddedPostgresPort: number;
  /** Largest request body accepted; larger ones get 413. */
  readonly maxBodyBytes: number;
  /** Live feeds (SSE): coalescing window, heartbeat interval, and how much a client may leave untaken before it is cut off. */
  readonly live: { readonly coalesceMs: number; readonly heartbeatMs: number; readonly maxBufferedBytes: number };
  readonly logLevel: z.infer<typeof environment>['LOG_LEVEL'];
}

export const LEDGER_CONFIG = Symbol('LEDGER_CONFIG');

/** Reads the environment once at startup; a bad value stops the service with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv): LedgerConfig {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new StartupError(`environment variable ${issue.path.join('.')} is invalid: ${issue.message}`);
  }
  const values = parsed.data;
  return {
    port: values.PORT,
    databaseUrl: values.DATABASE_URL,
    eventStoreConnectionString: values.EVENTSTORE_CONNECTION_STRING,
    dataDir: path.resolve(values.LEDGER_DATA_DIR),
    embeddedPostgresPort: values.LEDGER_PG_PORT,
    maxBodyBytes: values.LEDGER_MAX_BODY_BYTES,
    live: { coalesceMs: values.LEDGER_LIVE_COALESCE_MS, heartbeatMs: values.LEDGER_LIVE_HEARTBEAT_MS, maxBufferedBytes: values.LEDGER_LIVE_MAX_BUFFERED_BYTES },
    logLevel: values.LOG_LEVEL,
  };
}
