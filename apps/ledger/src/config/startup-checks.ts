import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from 'pino';
import { ConnectionStringError, eventStoreAddress, withTimeout, type EventLog } from '#event-log';
import { startEmbeddedPostgres, StartupError, type EmbeddedDatabase } from '../database/embedded-postgres.js';
import { loadUpstreams } from '../gateway/upstreams-config.js';
import { loadFirewallPolicy } from '../governance/firewall.js';
import { loadMcpServers } from '../governance/mcp-servers-config.js';
import { loadLogSigningKey } from '../verifiable-log/log-signing-key.js';
import type { LedgerConfig } from './ledger-config.js';
import { eventStoreDb } from '../event-log/event-store-db.js';

/**
 * Reads every file the configuration names before anything starts, so a missing or malformed
 * one stops the service with its one line (ConfigFileError) and leaves nothing running. The
 * modules read them again when they are built.
 */
export async function checkConfigurationFiles(config: LedgerConfig, env: NodeJS.ProcessEnv): Promise<void> {
  if (config.governance.mcpServersFile) loadMcpServers(config.governance.mcpServersFile);
  if (config.governance.firewallPolicyFile) loadFirewallPolicy(config.governance.firewallPolicyFile);
  if (config.gateway.upstreamsFile) loadUpstreams(config.gateway.upstreamsFile, env);
  // A key generated into the data folder is made later, once the folder is known to be writable.
  if (config.verifiableLog.signingKeyFile) await loadLogSigningKey(config.verifiableLog, config.dataDir);
}

export interface ConnectRetry {
  /** How long the first connection is retried (`LEDGER_CONNECT_RETRY_MS`). */
  readonly timeoutMs: number;
  /** Each failed attempt that will be retried. */
  readonly onRetry: (failure: { variable: string; address: string; problem: string; remainingMs: number }) => void;
}

/** What an attempt's failure says: whether waiting can help, and the problem in a few words. */
interface ConnectFailure {
  readonly retryable: boolean;
  readonly problem: string;
}

interface Dependency {
  readonly variable: string;
  readonly name: string;
  /** Where the connection string points, without its credentials, as its client reads it; none if it cannot. */
  readonly address: string | undefined;
  attempt(timeoutMs: number): Promise<void>;
  describe(error: unknown): ConnectFailure;
}

/** The first connections retried for `timeoutMs` (`LEDGER_CONNECT_RETRY_MS`), each retry a warning on `log`. */
export function connectRetry(timeoutMs: number, log: Logger): ConnectRetry {
  return {
    timeoutMs,
    onRetry: ({ variable, address, problem, remainingMs }) =>
      log.warn(
        { variable, address, problem, retryingForMs: remainingMs },
        `${variable}: ${address} is not reachable yet (${problem}); retrying`,
      ),
  };
}

/**
 * The configuration's PostgreSQL: the one `DATABASE_URL` names once it answers (it may still be starting, e.g.
 * beside us in compose), or the embedded one in the data folder.
 */
export async function openDatabase(config: LedgerConfig, retry: ConnectRetry): Promise<EmbeddedDatabase> {
  if (!config.databaseUrl)
    return startEmbeddedPostgres({ dataDir: path.join(config.dataDir, 'postgres'), port: config.embeddedPostgresPort });
  await waitForPostgres(config.databaseUrl, retry);
  return { connectionString: config.databaseUrl, adopted: false, stop: () => Promise.resolve() };
}

/** Waits, within the bound, until the PostgreSQL of `DATABASE_URL` takes a query. */
export function waitForPostgres(connectionString: string, retry: ConnectRetry): Promise<void> {
  return waitFor(retry, {
    variable: 'DATABASE_URL',
    name: 'PostgreSQL',
    address: postgresAddress(connectionString),
    async attempt(timeoutMs) {
      const client = new pg.Client({ connectionString, connectionTimeoutMillis: timeoutMs });
      // A server that goes away mid-attempt emits an error besides rejecting the pending call.
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    describe: describePostgresFailure,
  });
}

/**
 * The event log on the EventStoreDB of `EVENTSTORE_CONNECTION_STRING`, its operations bounded by `answerTimeoutMs`; a
 * string the client cannot use stops the start in one line that quotes nothing of it.
 */
export async function openEventStoreLog(connectionString: string, answerTimeoutMs: number): Promise<EventLog> {
  try {
    return (await eventStoreDb()).createEventStoreDbEventLog({ connectionString, answerTimeoutMs });
  } catch (error) {
    if (!(error instanceof ConnectionStringError)) throw error;
    const where = placeOf('EventStoreDB', eventStoreAddress(connectionString));
    throw new StartupError(`EVENTSTORE_CONNECTION_STRING: ${where} ${error.message}`);
  }
}

/** Waits, within the bound, until the EventStoreDB of `EVENTSTORE_CONNECTION_STRING` answers a read. */
export function waitForEventStore(connectionString: string, retry: ConnectRetry): Promise<void> {
  return waitFor(retry, {
    variable: 'EVENTSTORE_CONNECTION_STRING',
    name: 'EventStoreDB',
    address: eventStoreAddress(connectionString),
    async attempt(timeoutMs) {
      const eventLog = (await eventStoreDb()).createEventStoreDbEventLog({ connectionString });
      try {
        await withTimeout(eventLog.headPosition(), timeoutMs, () => new Error('timeout'));
      } finally {
        await eventLog.close().catch(() => undefined);
      }
    },
    describe(error) {
      if (error instanceof ConnectionStringError) return { retryable: false, problem: error.message };
      const type = (error as { type?: string }).type;
      if (type === 'access-denied') return { retryable: false, problem: 'refused the credentials (access denied)' };
      return { retryable: true, problem: networkCode(error) ?? type ?? 'no answer' };
    },
  });
}

/** Sessions that cannot succeed by waiting (credentials, a missing database) fail at once. */
const FATAL_SQLSTATES: Readonly<Record<string, string>> = {
  '28P01': 'refused the password',
  '28000': 'refused the login',
  '3D000': 'has no such database',
  '42501': 'refused the connection (insufficient privilege)',
};

function describePostgresFailure(error: unknown): ConnectFailure {
  // The client could not read the string (a malformed % escape): no wait mends that.
  if (error instanceof URIError) return { retryable: false, problem: `cannot be read (${error.message})` };
  const code = (error as { code?: string }).code;
  const fatal = code === undefined ? undefined : FATAL_SQLSTATES[code];
  if (fatal) return { retryable: false, problem: `${fatal} (${code})` };
  // 57P03: the server is starting up; anything else from the network may pass too.
  return { retryable: true, problem: networkCode(error) ?? code ?? 'no answer' };
}

async function waitFor(retry: ConnectRetry, dependency: Dependency): Promise<void> {
  const { variable, name, address } = dependency;
  const where = placeOf(name, address);
  const deadline = Date.now() + retry.timeoutMs;
  for (let delayMs = 250; ; delayMs = Math.min(delayMs * 2, 2_000)) {
    let failure: ConnectFailure;
    try {
      await dependency.attempt(Math.max(deadline - Date.now(), 1_000));
      return;
    } catch (error) {
      failure = dependency.describe(error);
    }
    if (!failure.retryable) throw new StartupError(`${variable}: ${where} ${failure.problem}`);
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0) {
      throw new StartupError(
        `${variable}: ${where} did not answer within LEDGER_CONNECT_RETRY_MS ` +
          `(${retry.timeoutMs} ms): ${failure.problem}`,
      );
    }
    retry.onRetry({ variable, address: address ?? name, problem: failure.problem, remainingMs });
    await sleep(Math.min(delayMs, remainingMs));
  }
}

/** A dependency as an error names it: where it is, when its connection string says so readably. */
function placeOf(name: string, address: string | undefined): string {
  return address === undefined ? name : `${name} at ${address}`;
}

/**
 * `host:port` (or several) of a PostgreSQL URL: no credentials, no database, no options. The credentials end at the
 * last `@` before the path, as pg reads them: a password may hold `@`. A `/`, `?` or `#` ends the authority for pg as
 * for any URL reader: what precedes it is the host pg connects to.
 */
function postgresAddress(connectionString: string): string {
  return connectionString
    .replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
    .replace(/^[^/?#]*@/, '')
    .split(/[/?#]/)[0];
}

/** The network's error codes a failure may quote: only these are read from a message, which may quote a secret. */
const NETWORK_CODES =
  /\b(ECONNREFUSED|ECONNRESET|ECONNABORTED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE)\b/;

/** The system error code (ECONNREFUSED, ENOTFOUND, …) an error carries or quotes. */
function networkCode(error: unknown): string | undefined {
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && /^E[A-Z_]+$/.test(code)) return code;
  if (typeof message !== 'string') return undefined;
  if (/timeout/i.test(message)) return 'timed out';
  return NETWORK_CODES.exec(message)?.[1];
}
