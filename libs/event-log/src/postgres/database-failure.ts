import pg from 'pg';

/**
 * How a statement failed on the database, when the database (not the statement, not its caller) is why:
 * - `busy`: no pooled connection came free within the pool's timeout: nothing was sent;
 * - `unavailable`: no connection could be opened (refused, reset or closed while opening, not opened in time, the
 *   server starting, full or read-only): nothing was done;
 * - `timeout`: the server cancelled a statement that ran past the statement timeout (or an operator cancelled it):
 *   nothing was done;
 * - `lost`: the connection broke while a statement was under way, or the server did not answer it at all (then the
 *   connection is closed): a write may have been committed.
 */
export type DatabaseFailure = 'busy' | 'unavailable' | 'timeout' | 'lost';

const TOLD = Symbol('databaseFailure');
type ConnectCallback = Parameters<pg.Client['connect']>[0];
/** SQLSTATEs a server sends instead of opening a session or instead of writing: nothing was done. */
const UNAVAILABLE_SQLSTATES = new Set(['08001', '08004', '57P03', '53300', '25006']);
/** SQLSTATEs of a session the server ended (shutdown, crash of another backend) or a connection failure (class 08). */
const LOST_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[12])$/;
/** The SQLSTATE of a statement the server cancelled: past `statement_timeout`, or by `pg_cancel_backend`. */
const CANCELLED_SQLSTATE = '57014';
/** Socket errors a query of a `DatabaseClient` is failed with when its connection breaks. */
const BROKEN_CONNECTION = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'EHOSTUNREACH', 'ENETUNREACH']);

/** A connection's configuration, with the server settings a `DatabaseClient` makes on it once opened. */
export interface DatabaseConnection extends pg.ClientConfig {
  readonly sessionSettings?: Readonly<Record<string, string>>;
}

/**
 * A pg client whose failures say which they are: an error opening its connection is `unavailable`; a broken
 * connection's error reaching a query is `lost`, and so is a query the server did not answer within the client's
 * `query_timeout`, whose connection it closes (still waiting for that answer, it would hold every later query).
 * Only what came through it, or shapes only pg makes, count (`databaseFailure`), so no other error (an upstream
 * provider's reset, a client's aborted body) passes for the database's. Once open, it makes its `sessionSettings`
 * before anything else runs on it. Pools configured by `databaseConnection` make it their `Client`.
 */
export class DatabaseClient extends pg.Client {
  private readonly sessionSettings: Readonly<Record<string, string>>;

  constructor(config?: string | DatabaseConnection) {
    super(config);
    this.sessionSettings = (typeof config === 'object' && config.sessionSettings) || {};
  }

  // pg's overloads: a callback (pg-pool) or a promise. `never` stands for what each gives back.
  override connect(callback?: ConnectCallback): never {
    // Until it is handed out, nobody else listens for its errors: the connection breaking while the settings are
    // made would be an unheard 'error' event, which ends the process. The settings' statement fails with it.
    const unheard = () => undefined;
    this.on('error', unheard);
    const opened = new Promise<void>((resolve, reject) =>
      super.connect((error: Error | null) => (error ? reject(error) : resolve())),
    )
      .then(() =>
        this.settle().catch((error: Error) => {
          // Open, but not as it must be: not handed out (a pool forgets a client that failed to connect).
          this.end().catch(() => undefined);
          throw error;
        }),
      )
      .finally(() => this.off('error', unheard))
      .catch((error: Error) => {
        throw told(error, 'unavailable');
      });
    if (!callback) return opened as never;
    const answer = callback as (error: Error | null, client?: pg.Client) => void;
    opened.then(
      () => answer(null, this),
      (error: Error) => answer(error),
    );
    return undefined as never;
  }

  /** The session settings, in one statement. */
  private async settle(): Promise<void> {
    const settings = Object.entries(this.sessionSettings);
    if (settings.length === 0) return;
    const calls = settings.map((_, index) => `set_config($${2 * index + 1}, $${2 * index + 2}, false)`);
    await super.query(`SELECT ${calls.join(', ')}`, settings.flat());
  }

  // pg's overloads take callbacks (pg-pool, TypeORM), promises (ours) or submittables (left as they are).
  override query(...args: unknown[]): never {
    const last = args.at(-1);
    if (typeof last === 'function')
      args[args.length - 1] = (error: Error | null, result: unknown) =>
        (last as (error: Error | null, result: unknown) => void)(error && this.queryFailure(error), result);
    const result = (super.query as (...args: unknown[]) => unknown)(...args);
    if (!(result instanceof Promise)) return result as never;
    return result.catch((error: Error) => {
      throw this.queryFailure(error);
    }) as never;
  }

  private queryFailure(error: Error): Error {
    if (error.constructor !== Error || error.message !== 'Query read timeout') return brokenTold(error);
    // Ending marks it at once for the pool not to take back; pg destroys a socket with a query under way.
    this.end().catch(() => undefined);
    return told(error, 'lost');
  }
}

/** How `error` (or what it wraps: TypeORM's `driverError`, a `cause`) failed on the database; undefined if not that. */
export function databaseFailure(error: unknown): DatabaseFailure | undefined {
  // Not `instanceof Error`: Node's system errors may come from another realm (under Jest's VM modules).
  for (let seen = error, depth = 0; typeof seen === 'object' && seen !== null && depth < 4; depth++) {
    const failure = ownFailure(seen as Error & { [TOLD]?: DatabaseFailure });
    if (failure) return failure;
    seen = (seen as { driverError?: unknown }).driverError ?? (seen as Error).cause;
  }
  return undefined;
}

function ownFailure(error: Error & { [TOLD]?: DatabaseFailure }): DatabaseFailure | undefined {
  if (error[TOLD]) return error[TOLD];
  if (error instanceof pg.DatabaseError && error.code !== undefined) {
    if (UNAVAILABLE_SQLSTATES.has(error.code)) return 'unavailable';
    if (error.code === CANCELLED_SQLSTATE) return 'timeout';
    return LOST_SQLSTATE.test(error.code) ? 'lost' : undefined;
  }
  if (error.constructor !== Error) return undefined;
  // pg-pool's own words: its wait for a free connection, and a connection it gave up opening.
  if (error.message === 'timeout exceeded when trying to connect') return 'busy';
  if (error.message === 'Connection terminated due to connection timeout') return 'unavailable';
  return undefined;
}

/** Marks `error` as failed on the database, as `failure` (the first mark stays): `databaseFailure` then says so. */
export function told(error: Error, failure: DatabaseFailure): Error {
  if (typeof error === 'object' && error !== null && !(TOLD in error))
    Object.defineProperty(error, TOLD, { value: failure });
  return error;
}

/** A query's error, told `lost` when it is the connection's breaking: a socket's error, or pg's word for an end. */
function brokenTold(error: Error): Error {
  const { code } = error as { code?: unknown };
  const broken =
    (typeof code === 'string' && BROKEN_CONNECTION.has(code)) ||
    (error.constructor === Error && /^Connection terminated\b|is not queryable$/.test(error.message));
  return broken ? told(error, 'lost') : error;
}

/** The smallest share `TimeoutShare` goes down to: one event of any page or batch the service makes. */
const MIN_SHARE = 2 ** -24;

/**
 * The share (at most all) of a page or batch to take now: halved each time a statement of it ran past the statement
 * timeout, doubled back each time one ran. A consumer that retries what the server cancelled then makes progress on a
 * slow database, where the same statement would be cancelled for ever (decision 0064).
 */
export class TimeoutShare {
  private share = 1;

  /** The share of `full`, at least 1. */
  of(full: number): number {
    return Math.max(1, Math.floor(full * this.share));
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    try {
      const result = await work();
      this.share = Math.min(1, this.share * 2);
      return result;
    } catch (error) {
      if (databaseFailure(error) === 'timeout') this.share = Math.max(MIN_SHARE, this.share / 2);
      throw error;
    }
  }
}
