import { rememberNewest } from '#core';
import pg from 'pg';
import { prepareAppends } from '../append-plan.js';
import type {
  AppendResult,
  EventFilter,
  EventLog,
  EventLogHealth,
  ExpectedRevision,
  HashedEvent,
  NewEvent,
  ProjectionEvent,
  ReadAllOptions,
  ReadAllResult,
  ReadStreamOptions,
  RecordedEvent,
  StreamAppend,
  SubscribeOptions,
  Subscription,
} from '../event-log.js';
import { DEFAULT_READ_PAGE_BYTES, pageLimit, positiveInteger } from '../read-limits.js';
import { DatabaseClient, TimeoutShare, type DatabaseConnection } from './database-failure.js';
import { APPEND_LOCK_KEY, GroupCommitWriter, type CommitStats } from './group-commit-writer.js';
import { heardPool } from './heard-pool.js';
import { healthPoolOptions, healthQuery } from './health-query.js';
import { LogStatistics } from './log-statistics.js';
import { PostgresNotifier } from './postgres-notifier.js';
import { PollingSubscription } from './polling-subscription.js';
import { RecentCommits } from './recent-commits.js';

/**
 * How long opening a connection, or waiting for a free one in a pool, may take before it fails. Without a bound a
 * server that accepts and never answers (frozen, or a failed-over address that drops packets) hangs every request
 * that needs a new connection, for ever, and a LISTEN connection that reconnects never comes back.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Filters whose page shares are kept (the service's consumers have a handful; clients' live feeds the rest). */
const MAX_PAGE_SHARES = 1_000;

/**
 * How long the client waits for an answer past the statement timeout before it gives up on the server: long enough
 * for the server's own cancellation (nothing done, the connection kept) to arrive first from a server that answers.
 */
const SERVER_CANCEL_GRACE_MS = 1_000;

/** What bounds the waits on PostgreSQL (decisions 0063 and 0064). */
export interface DatabaseBounds {
  /** Opening a connection, or waiting for a free one in a pool. */
  readonly connectTimeoutMs: number;
  /** A statement: the server cancels it past this (`57014`); none if not given. */
  readonly statementTimeoutMs?: number;
}

/**
 * Server-side keep-alive probes: the server then finds a connection whose client is gone without a word (a network
 * partition, a NAT that dropped it, a client that gave up on a frozen path) in about 25 s, ending its session and
 * what the session held (a projection's lead, a transaction's locks), where the system's default waits two hours.
 */
const SERVER_KEEP_ALIVE: Readonly<Record<string, string>> = {
  tcp_keepalives_idle: '10',
  tcp_keepalives_interval: '5',
  tcp_keepalives_count: '3',
};

/**
 * How the service connects to PostgreSQL, every pool and LISTEN connection alike: opening bounded by
 * `connectTimeoutMs`, and keep-alive probes from both sides that find a connection whose other side is gone (a
 * failover, a host lost) in minutes. With `statementTimeoutMs`, a statement is bounded too, even on a server that
 * stopped answering with its connection open (frozen: its kernel still answers keep-alive probes): the client gives
 * up a moment after the server would have cancelled it, and `DatabaseClient` closes that connection. A pool given
 * this configuration makes `DatabaseClient`s, which make the server-side settings on each connection they open: set
 * there rather than in the startup packet, which a pooler in between may refuse, and rather than in the connection
 * string, whose own parameters are the operator's.
 */
export function databaseConnection(
  connectionString: string,
  bounds: DatabaseBounds,
): DatabaseConnection & Pick<pg.PoolConfig, 'Client'> {
  const { statementTimeoutMs } = bounds;
  const statementBound = statementTimeoutMs !== undefined && {
    statement_timeout: String(positiveInteger('statementTimeoutMs', statementTimeoutMs)),
  };
  return {
    connectionString,
    connectionTimeoutMillis: positiveInteger('connectTimeoutMs', bounds.connectTimeoutMs),
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(statementTimeoutMs !== undefined && { query_timeout: statementTimeoutMs + SERVER_CANCEL_GRACE_MS }),
    sessionSettings: { ...SERVER_KEEP_ALIVE, ...statementBound },
    Client: DatabaseClient,
  };
}

export interface PostgresEventLogOptions {
  readonly connectionString: string;
  readonly poolSize?: number;
  /** `DEFAULT_CONNECT_TIMEOUT_MS` by default. */
  readonly connectTimeoutMs?: number;
  /** Unbounded by default (a command line's long reads); the service bounds it (`DatabaseBounds`). */
  readonly statementTimeoutMs?: number;
  readonly maxEventsPerCommit?: number;
  readonly readPageSize?: number;
  /**
   * A page of `readAll` also stops once its events' data reaches this many bytes (at least one
   * event), so that a log of large events cannot make a read hold gigabytes. 8 MiB by default.
   */
  readonly readPageBytes?: number;
  /**
   * A page of the log (`readAll`, `readAllForProjections`) that stops this many events or more short
   * of the head checks the log's statistics (`LogStatistics`). 20,000 by default.
   */
  readonly statisticsCheckDistance?: number;
  /** Subscribers poll at this interval when no notification arrives (LISTEN down, or idle). */
  readonly pollIntervalMs?: number;
  readonly clock?: () => Date;
  readonly onCommit?: (stats: CommitStats) => void;
  readonly onError?: (error: Error) => void;
}

/**
 * Rows come back as arrays (`rowMode: 'array'`), in the order of the columns asked for: no object
 * with named keys is built per row only to be copied into an event.
 */
type PlaceRow = [position: string, streamId: string, revision: string];
type ProjectionRow = [...PlaceRow, type: string, data: unknown, recordedAt: string];
type HashRow = [...PlaceRow, hash: string];
type EventRow = [
  ...ProjectionRow,
  eventId: string,
  schemaVersion: number,
  correlationId: string | null,
  causationId: string | null,
  actor: string,
  tenant: string,
  prevHash: string,
  hash: string,
];

/** A column a read asks for: a column of `event_log_records`, or `[name, expression]`. */
type Column = string | readonly [name: string, expression: string];

const selectList = (columns: readonly Column[]) =>
  columns.map((column) => (typeof column === 'string' ? column : `${column[1]} AS ${column[0]}`)).join(', ');
const nameList = (columns: readonly Column[]) =>
  columns.map((column) => (typeof column === 'string' ? column : column[0])).join(', ');

/**
 * `recorded_at` comes back as the ISO text the chain hash covers (`Date#toISOString`: UTC,
 * milliseconds): PostgreSQL formats it on its own core instead of the driver parsing a date per
 * row and the reader formatting it again.
 */
const PROJECTION_COLUMNS: readonly Column[] = [
  'position',
  'stream_id',
  'revision',
  'type',
  'data',
  ['recorded_at', `to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`],
];
/** What the checkpoint signer reads of each event (`readAllHashes`). */
const HASH_COLUMNS: readonly Column[] = ['position', 'stream_id', 'revision', 'hash'];
/**
 * An event's data size as the client will receive it. A compressed value is measured by its text:
 * its stored size can be a ninetieth of what it decodes to. Any other is measured where it lies,
 * which costs nothing and is close to its text's length.
 */
const DATA_BYTES = `CASE WHEN pg_column_compression(data) IS NULL THEN pg_column_size(data) ELSE octet_length(data::text) END`;
/**
 * Every column of an event. Each one costs PostgreSQL its formatting and the driver its parsing, per
 * row: a read for read models asks for `PROJECTION_COLUMNS` alone (decision 0048).
 */
const EVENT_COLUMNS: readonly Column[] = [
  ...PROJECTION_COLUMNS,
  'event_id',
  'schema_version',
  'correlation_id',
  'causation_id',
  'actor',
  'tenant',
  'prev_hash',
  'hash',
];

/**
 * A page of the log: $1 the position it starts after, $2 its count, $3 its byte bound, then
 * `filterParams`. Each row holds the columns asked for, then whether the page's data reached the
 * byte bound at that row (null on every row but the one that did), then the head. One statement,
 * one snapshot: everything at or below the head it sees is committed (the head moves in the same
 * transaction), so reading up to it can never skip an event that commits later. The head row comes
 * back even when no event follows. The page is cut after the event whose data reaches the byte
 * bound, counted over the page's rows alone (the LIMIT comes first); the sizes it is counted with
 * are not sent, as each column sent costs PostgreSQL its formatting and the driver its parsing, per
 * row. The head bounds the page outside the LIMIT: inside, the planner cannot see its value, and
 * with statistics older than the log (after a bulk load or a restore, before autovacuum comes
 * round) it fetched and sorted every event up to the head for each page (decision 0046). The
 * stream and envelope lookups still need statistics: `LogStatistics` keeps them current.
 */
export function pageQuery(
  columns: readonly Column[],
  filter: EventFilter | undefined,
): { text: string; filterParams: string[][] } {
  const { clause, params } = filterClause(filter, 4);
  const text = `SELECT e.*, h.position AS head FROM event_log_head h
    LEFT JOIN LATERAL (
      SELECT ${nameList(columns)}, CASE WHEN bytes_through >= $3 THEN true END AS bytes_reached FROM (
        SELECT page.*, sum(page.data_bytes) OVER (ORDER BY page.position ROWS UNBOUNDED PRECEDING) AS bytes_through
          FROM (SELECT ${selectList(columns)}, ${DATA_BYTES} AS data_bytes FROM event_log_records
                 WHERE position > $1 ${clause}
                 ORDER BY position LIMIT $2) page) sized
       WHERE position <= h.position AND bytes_through - data_bytes < $3
       ORDER BY position) e ON true`;
  return { text, filterParams: params };
}

/** The PostgreSQL event log: the embedded default and the single-machine engine. Schema comes from its migration. */
export async function createPostgresEventLog(options: PostgresEventLogOptions): Promise<EventLog> {
  const readPageSize = positiveInteger('readPageSize', options.readPageSize ?? 1_000);
  const readPageBytes = positiveInteger('readPageBytes', options.readPageBytes ?? DEFAULT_READ_PAGE_BYTES);
  const connection = databaseConnection(options.connectionString, {
    connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    statementTimeoutMs: options.statementTimeoutMs,
  });
  const onError = options.onError ?? (() => undefined);
  const pool = heardPool({ ...connection, max: options.poolSize ?? 8 }, onError);
  const healthPool = heardPool(healthPoolOptions(connection), onError);
  pool.on('connect', (client) => {
    // The driver's parser for bigint tests every value against a regular expression and gives back the same text
    // either way: positions and revisions are taken as the text they come as.
    client.setTypeParser(pg.types.builtins.INT8, (value: string) => value);
  });
  const notifier = new PostgresNotifier(connection, onError);
  const recent = new RecentCommits(() => notifier.bump());
  const statistics = new LogStatistics(
    pool,
    positiveInteger('statisticsCheckDistance', options.statisticsCheckDistance ?? 20_000),
    onError,
  );
  const writer = new GroupCommitWriter(pool, {
    maxEventsPerCommit: options.maxEventsPerCommit ?? 5_000,
    clock: options.clock ?? (() => new Date()),
    onCommit: options.onCommit,
    recent,
  });
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const subscriptions = new Set<Subscription>();
  try {
    await notifier.start();
  } catch (error) {
    await Promise.all([pool.end(), healthPool.end()]);
    throw error;
  }

  async function headPosition(): Promise<bigint> {
    const { rows } = await pool.query<{ position: string }>('SELECT position FROM event_log_head');
    return BigInt(rows[0].position);
  }

  /**
   * Pages shrink while the server cancels them for taking too long (a slow database), and grow back: per filter, so
   * that a client's own filtered scans (a live feed of types that match nothing) shrink no other reader's pages.
   */
  const pageShares = new Map<string, TimeoutShare>();
  const pageShareOf = (filter: ReadAllOptions['filter']): TimeoutShare => {
    const key = JSON.stringify(filter ?? null);
    const share = pageShares.get(key) ?? new TimeoutShare();
    rememberNewest(pageShares, key, share, MAX_PAGE_SHARES);
    return share;
  };

  /** A page of the log with the columns given, each row made an event by `toEvent`. */
  async function readPage<Row extends unknown[], Event extends Pick<RecordedEvent, 'position'>>(
    readOptions: ReadAllOptions,
    columns: readonly Column[],
    toEvent: (row: Row) => Event,
  ): Promise<ReadAllResult<Event>> {
    const after = readOptions.fromPosition ?? 0n;
    const pageShare = pageShareOf(readOptions.filter);
    const limit = pageShare.of(pageLimit(readOptions.maxCount, readPageSize));
    const { text, filterParams } = pageQuery(columns, readOptions.filter);
    const { rows } = await pageShare.run(() =>
      pool.query<unknown[]>({
        text,
        values: [after.toString(), limit, pageShare.of(readPageBytes), ...filterParams],
        rowMode: 'array',
      }),
    );
    // Each row: the columns, whether the byte bound was reached there, the head.
    const reachedBytes = columns.length;
    const head = BigInt(rows[0][reachedBytes + 1] as string);
    if (head <= after) return { events: [], checkpoint: after, caughtUp: true };
    const events = rows[0][0] === null ? [] : rows.map((row) => toEvent(row as Row));
    const full = events.length === limit || rows.at(-1)![reachedBytes] === true;
    if (!full) return { events, checkpoint: head, caughtUp: true };
    const checkpoint = events.at(-1)!.position;
    await statistics.afterPage(checkpoint, head);
    return { events, checkpoint, caughtUp: false };
  }

  const readAll = (readOptions: ReadAllOptions = {}) => readPage(readOptions, EVENT_COLUMNS, toRecordedEvent);

  async function readStream(streamId: string, readOptions: ReadStreamOptions = {}): Promise<readonly RecordedEvent[]> {
    const backwards = readOptions.direction === 'backwards';
    const from = readOptions.fromRevision ?? (backwards ? null : 0n);
    const fromClause = from === null ? '' : backwards ? 'AND revision <= $3' : 'AND revision >= $3';
    const { rows } = await pool.query<EventRow>({
      text: `SELECT ${selectList(EVENT_COLUMNS)} FROM event_log_records
        WHERE stream_key = (SELECT stream_key FROM event_log_streams WHERE stream_id = $1) ${fromClause}
        ORDER BY revision ${backwards ? 'DESC' : 'ASC'} LIMIT $2`,
      values:
        from === null
          ? [streamId, readOptions.maxCount ?? null]
          : [streamId, readOptions.maxCount ?? null, from.toString()],
      rowMode: 'array',
    });
    return rows.map((row) => toRecordedEvent(row));
  }

  async function health(): Promise<EventLogHealth> {
    // What can stall subscribers here: a writer transaction that holds the append lock (the
    // visible head cannot move past it). Report how long the current holder has held it. And what refuses every
    // append: a server that takes no writes (a failover left the address on a standby, or read-only by setting).
    const rows = await healthQuery<{ held_ms: number | null; waiting: number; head: string; read_only: boolean }>(
      healthPool,
      `SELECT (SELECT position FROM event_log_head)::text AS head,
              (pg_is_in_recovery() OR current_setting('transaction_read_only')::bool) AS read_only,
              (SELECT extract(epoch FROM now() - a.xact_start) * 1000 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = $1 AND l.objsubid = 1 AND l.granted LIMIT 1)::float8 AS held_ms,
              (SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = $1 AND l.objsubid = 1 AND NOT l.granted)::int AS waiting`,
      [APPEND_LOCK_KEY],
    );
    return {
      engine: 'postgres',
      headPosition: BigInt(rows[0].head),
      appendLockHeldMs: rows[0].held_ms,
      waitingWriters: rows[0].waiting,
      takesWrites: !rows[0].read_only,
    };
  }

  return {
    append: async (
      streamId: string,
      events: readonly NewEvent[],
      expected: ExpectedRevision,
    ): Promise<AppendResult> => {
      const [result] = await writer.append(prepareAppends([{ streamId, events, expectedRevision: expected }]));
      return result;
    },
    appendMany: async (appends: readonly StreamAppend[]): Promise<AppendResult[]> =>
      await writer.append(prepareAppends(appends)),
    appendsManyAtomically: true,
    readStream,
    readAll,
    readAllForProjections: (readOptions = {}) => readPage(readOptions, PROJECTION_COLUMNS, toProjectionEvent),
    readAllHashes: (readOptions = {}) => readPage(readOptions, HASH_COLUMNS, toHashedEvent),
    headPosition,
    health,
    subscribeToAll(subscribeOptions: SubscribeOptions = {}): Subscription {
      const { filter, fromPosition = 0n } = subscribeOptions;
      const subscription = new PollingSubscription(
        (after) => readAll({ fromPosition: after, filter }),
        recent,
        notifier,
        { fromPosition, filter, pageSize: readPageSize, pollIntervalMs },
      );
      subscriptions.add(subscription);
      return subscription;
    },
    async close() {
      await writer.close();
      await Promise.all([...subscriptions].map((subscription) => subscription.close()));
      await notifier.close();
      await statistics.settled();
      await Promise.all([pool.end(), healthPool.end()]);
    },
  };
}

function toProjectionEvent([position, streamId, revision, type, data, recordedAt]: ProjectionRow): ProjectionEvent {
  return { type, streamId, revision: BigInt(revision), position: BigInt(position), data, metadata: { recordedAt } };
}

function toHashedEvent([position, streamId, revision, hash]: HashRow): HashedEvent {
  return { streamId, revision: BigInt(revision), position: BigInt(position), metadata: { hash } };
}

// The metadata is written out, not spread from another object: V8's object spread made every read
// of the log 1.5× as slow (docs/benchmarks.md, "Eighth issue-15 round").
function toRecordedEvent([
  position,
  streamId,
  revision,
  type,
  data,
  recordedAt,
  id,
  schemaVersion,
  correlationId,
  causationId,
  actor,
  tenant,
  prevHash,
  hash,
]: EventRow): RecordedEvent {
  return {
    id,
    type,
    streamId,
    revision: BigInt(revision),
    position: BigInt(position),
    data,
    metadata: { recordedAt, schemaVersion, correlationId, causationId, actor, tenant, prevHash, hash },
  };
}

/** Prefix filters as `LIKE ANY`, with LIKE's wildcards escaped; parameters numbered from `firstParam`. */
function filterClause(filter: EventFilter | undefined, firstParam: number): { clause: string; params: string[][] } {
  const parts: string[] = [];
  const params: string[][] = [];
  const likePatterns = (prefixes: readonly string[]) =>
    prefixes.map((prefix) => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  if (filter?.eventTypePrefixes) {
    params.push(likePatterns(filter.eventTypePrefixes));
    parts.push(`AND type LIKE ANY($${firstParam + params.length - 1}::text[])`);
  }
  if (filter?.streamPrefixes) {
    params.push(likePatterns(filter.streamPrefixes));
    parts.push(`AND stream_id LIKE ANY($${firstParam + params.length - 1}::text[])`);
  }
  return { clause: parts.join(' '), params };
}
