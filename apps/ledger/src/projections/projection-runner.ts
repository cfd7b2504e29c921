import {
  databaseFailure,
  TimeoutShare,
  type EventLog,
  type RecordedEvent,
  type Subscription,
  type SubscriptionBatch,
} from '#event-log';
import pg, { type Pool, type PoolClient, type QueryConfig } from 'pg';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { inTransaction, whileHolding } from '../database/transaction.js';
import type { BatchStatement, ProjectionDefinition } from './projection.js';

/** An operator's repair found an instance running the projection (or, `name` the service, any instance running). */
export class ProjectionRunningError extends Error {
  constructor(name: string) {
    super(`an instance is running ${name}: stop every instance of the service first`);
    this.name = 'ProjectionRunningError';
  }
}

/** Another runner moved the checkpoint under us: a second instance is running the projection. */
export class CheckpointMovedError extends Error {
  constructor(name: string, expected: bigint) {
    super(`projection ${name}: checkpoint is no longer ${expected}; another runner moved it`);
    this.name = 'CheckpointMovedError';
  }
}

export interface ProjectionRunnerOptions {
  readonly retryDelayMs?: number;
  readonly onError?: (error: Error) => void;
  /** How long a checkpoint moved only past events this projection ignores may wait before it is stored on its own. */
  readonly idleCheckpointMs?: number;
  /**
   * This many ms at least from one batch's commit to the next batch, for a consumer nothing waits on
   * closely (the Merkle log): it takes the log in fewer, larger batches, a transaction each, instead
   * of one per append.
   */
  readonly batchIntervalMs?: number;
}

/**
 * A batch with no events of the projection's (the log grew with others) moves the checkpoint in
 * memory at once and in the database with the next batch that has some, or at most this long after
 * it first moved past the stored one: a transaction per log growth per projection was most of what
 * a governed tool call committed. Instances that do not lead read the stored checkpoint, so it
 * bounds how late they see it move.
 */
const IDLE_CHECKPOINT_MS = 100;

/**
 * Runs a projection on a durable, checkpointed subscription to the log. One instance at a time
 * runs it (a session advisory lock per projection); the others follow its checkpoint.
 *
 * Exactly once: each batch's rows and the checkpoint commit in one transaction, and the
 * checkpoint moves by compare-and-set (past events the projection ignores, lazily: see
 * `IDLE_CHECKPOINT_MS`). After any failure the in-memory state is dropped and the
 * runner restarts from the stored checkpoint.
 */
export class ProjectionRunner {
  private applied = -1n;
  /** Aborted by stop(): a wait between tries or batches ends at once, so a shutdown does not sit out a follower's retry. */
  private readonly stopping = new AbortController();
  private subscription: Subscription | undefined;
  private loop: Promise<void> | undefined;
  private readonly waiters = new Set<() => void>();
  /** Batches commit in smaller slices while the server cancels their commits for taking too long (decision 0064). */
  private readonly commitShare = new TimeoutShare();

  constructor(
    private readonly pool: Pool,
    private readonly eventLog: EventLog,
    private readonly definition: ProjectionDefinition,
    private readonly options: ProjectionRunnerOptions = {},
  ) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.wakeWaiters();
    await this.subscription?.close();
    await this.loop;
  }

  /** Resolves true once the read models reflect `position`, false after `timeoutMs`. */
  async waitForPosition(position: bigint, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((await this.position()) >= position) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 50));
        this.waiters.add(wake);
      });
    }
  }

  /** The position the read models reflect: this runner's, or the stored checkpoint when another instance runs the projection. */
  async position(): Promise<bigint> {
    if (this.applied >= 0n) return this.applied;
    const { rows } = await this.pool.query<{ position: string }>(
      'SELECT position FROM projection_checkpoints WHERE name = $1',
      [this.definition.name],
    );
    return rows[0] ? BigInt(rows[0].position) : 0n;
  }

  /**
   * For an operator's repair, every instance stopped: runs `work` in a transaction while this process holds the
   * projection's lead (a ProjectionRunningError when an instance has it), and sets the stored checkpoint to the
   * position `work` gives, if any. The next runner to lead starts from it.
   */
  async rewound<T>(work: (client: PoolClient) => Promise<{ position?: bigint; result: T }>): Promise<T> {
    const { name } = this.definition;
    return whileHolding(
      this.pool,
      lockKeyOf(name).toString(),
      () => new ProjectionRunningError(name),
      () =>
        inTransaction(this.pool, async (client) => {
          const { position, result } = await work(client);
          if (position !== undefined) await setStoredCheckpoint(client, name, position);
          return result;
        }),
    );
  }

  private async run(): Promise<void> {
    const lockKey = lockKeyOf(this.definition.name);
    while (!this.stopped) {
      // Not `instanceof Error`: a socket's error can come from another realm (Node's own, under a VM context).
      const taken = await this.pool.connect().then(
        (client) => ({ client }),
        (error: Error) => ({ error }),
      );
      if ('error' in taken) {
        await this.pause(taken.error);
        continue;
      }
      const lock = taken.client;
      // The lock's connection can die while it waits between batches (a database restart): without a
      // listener that would crash the process; with it, the leader steps down and takes the lock anew.
      let broken: Error | undefined;
      const stepDown = (error: Error) => {
        broken = error;
        void this.subscription?.close();
      };
      lock.on('error', stepDown);
      try {
        const { rows } = await lock.query<{ leader: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS leader', [
          lockKey.toString(),
        ]);
        if (!rows[0].leader) {
          this.applied = -1n;
          await this.pause();
          continue;
        }
        try {
          await this.follow(lock);
        } finally {
          this.applied = -1n;
          await lock.query('SELECT pg_advisory_unlock($1::bigint)', [lockKey.toString()]);
        }
      } catch (error) {
        await this.pause(error as Error);
      } finally {
        // The pool hands the same client out again: a listener left on it would pile up.
        lock.off('error', stepDown);
        lock.release(broken);
      }
    }
  }

  /** Follows the log as the leader, on `lock`, the connection that holds the lead: each batch commits on it. */
  private async follow(lock: PoolClient): Promise<void> {
    this.definition.reset();
    let stored = await this.storedCheckpoint(lock);
    await this.definition.resume?.();
    this.advance(stored);
    let reached = stored;
    this.subscription = this.eventLog.subscribeToAll({ fromPosition: stored, filter: this.definition.filter });
    // stop() may have run while we were taking the lock, before this subscription existed.
    if (this.stopped) await this.subscription.close();
    const batches = this.subscription[Symbol.asyncIterator]();
    const idleCheckpointMs = this.options.idleCheckpointMs ?? IDLE_CHECKPOINT_MS;
    const { batchIntervalMs = 0 } = this.options;
    const writesFor = this.definition.writesFor ?? (() => true);
    let lastBatchAt = -Infinity;
    // When the checkpoint first moved past the stored one without being stored: steady traffic of
    // other events must not put the store off for ever.
    let unstoredSince = 0;
    try {
      for (;;) {
        const wait = lastBatchAt + batchIntervalMs - performance.now();
        if (wait > 0) await this.idle(wait);
        const next = batches.next();
        let result =
          reached > stored ? await within(next, unstoredSince + idleCheckpointMs - performance.now()) : await next;
        if (!result) {
          await this.storeCheckpoint(lock, stored, reached);
          stored = reached;
          result = await next;
        }
        if (result.done) break;
        const batch = result.value;
        if (batch.checkpoint === reached) continue;
        if (batch.events.length > 0) this.definition.react?.(batch.events);
        const committed = batch.events.some(writesFor) ? await this.commitInSlices(lock, batch, stored) : stored;
        if (committed !== stored) {
          lastBatchAt = performance.now();
          stored = committed;
        } else if (reached === stored) unstoredSince = performance.now();
        reached = batch.checkpoint;
        this.advance(reached);
      }
      if (reached > stored) await this.storeCheckpoint(lock, stored, reached);
    } catch (error) {
      this.definition.reset();
      throw error;
    }
  }

  /**
   * Commits the batch in slices of the share `commitShare` allows (all of it, unless commits ran past the statement
   * timeout); the position stored last, `from` when no slice had anything to write.
   */
  private async commitInSlices(lock: PoolClient, batch: SubscriptionBatch, from: bigint): Promise<bigint> {
    const { events } = batch;
    let stored = from;
    for (let start = 0; start < events.length;) {
      const end = Math.min(events.length, start + this.commitShare.of(events.length));
      const to = end === events.length ? batch.checkpoint : events[end - 1].position;
      stored = await this.commitSlice(lock, events.slice(start, end), stored, to);
      start = end;
    }
    return stored;
  }

  /**
   * Commits `events` with the checkpoint's move to `to`; the position stored. Events the server refuses together for
   * what their rows hold, not for the database failing or a cancel, are committed again in halves, each folded afresh:
   * four forks of a session of 105 MB of text made one jsonb parameter past PostgreSQL's 256 MB, and the batch, retried
   * whole for ever, stopped the projection for every tenant. One event refused alone still stops it: exactly once.
   */
  private async commitSlice(
    lock: PoolClient,
    events: readonly RecordedEvent[],
    from: bigint,
    to: bigint,
  ): Promise<bigint> {
    try {
      return (await this.commitShare.run(() => this.commitBatch(lock, events, from, to))) ? to : from;
    } catch (error) {
      if (events.length === 1 || !refusedForWhatItHolds(error)) throw error;
      this.definition.reset();
      const half = Math.ceil(events.length / 2);
      const stored = await this.commitSlice(lock, events.slice(0, half), from, events[half - 1].position);
      return this.commitSlice(lock, events.slice(half), stored, to);
    }
  }

  /**
   * Folds the batch and commits its rows with the checkpoint's move from `from` to `to`: in one statement when the
   * projection gives one, else in a transaction. False when the projection had nothing to write (nothing committed).
   */
  private async commitBatch(
    lock: PoolClient,
    events: readonly RecordedEvent[],
    from: bigint,
    to: bigint,
  ): Promise<boolean> {
    const { definition, eventLog } = this;
    if (!definition.writes) {
      await inTransaction(lock, async (client) => {
        await definition.handle(events, { client, eventLog });
        await this.storeCheckpoint(client, from, to);
      });
      return true;
    }
    const statement = await definition.writes(events, { client: lock, eventLog });
    if (!statement) return false;
    await lock.query(withCheckpointMove(statement, definition.name, from, to)).catch((error: unknown) => {
      throw error instanceof pg.DatabaseError && error.code === CHECKPOINT_MOVED
        ? new CheckpointMovedError(definition.name, from)
        : error;
    });
    return true;
  }

  /** Moves the stored checkpoint from `from` to `to`, by compare-and-set. */
  private async storeCheckpoint(client: PoolClient, from: bigint, to: bigint): Promise<void> {
    const moved = await client.query({
      name: 'projection-checkpoint-move',
      text: 'UPDATE projection_checkpoints SET position = $3, updated_at = now() WHERE name = $1 AND position = $2',
      values: [this.definition.name, from.toString(), to.toString()],
    });
    if (moved.rowCount !== 1) throw new CheckpointMovedError(this.definition.name, from);
  }

  /** Creates the checkpoint at `position` unless it exists: a consumer that must not act on history it predates starts at the log's head. */
  async createCheckpointAt(position: bigint): Promise<void> {
    await this.pool.query(
      'INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING',
      [this.definition.name, position.toString()],
    );
  }

  private async storedCheckpoint(client: PoolClient): Promise<bigint> {
    await client.query(
      'INSERT INTO projection_checkpoints (name, position) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING',
      [this.definition.name],
    );
    const { rows } = await client.query<{ position: string }>(
      'SELECT position FROM projection_checkpoints WHERE name = $1',
      [this.definition.name],
    );
    return BigInt(rows[0].position);
  }

  private advance(position: bigint): void {
    this.applied = position;
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private async pause(error?: Error): Promise<void> {
    if (error && !this.stopped) this.options.onError?.(error);
    await this.idle(this.options.retryDelayMs ?? 1_000);
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /** Waits `ms`, or until stop(). */
  private idle(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.stopping.signal }).catch(() => undefined);
  }
}

/**
 * Sets a projection's stored checkpoint to `position`, whatever it was: an operator's repair, a rebuild's swap.
 * Named in `public`: a rebuild runs it under its scratch schema's search_path.
 */
export async function setStoredCheckpoint(client: PoolClient, name: string, position: bigint): Promise<void> {
  await client.query(
    `INSERT INTO public.projection_checkpoints (name, position) VALUES ($1, $2)
     ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = now()`,
    [name, position.toString()],
  );
}

/** SQLSTATE of `projection_checkpoint_moved`'s refusal (migration 1763800000330). */
const CHECKPOINT_MOVED = 'BLCKP';
/** A statement's WITH, up to its first CTE's name: the checkpoint's CTEs go in there (a comment there would swallow them). */
const LEADING_WITH = /^\s*WITH\s+(RECURSIVE\s+)?(?=[a-z_"])/i;
/** A statement without a WITH of its own: the checkpoint's CTEs go in front of it. */
const PLAIN_WRITE = /^\s*(INSERT|UPDATE|DELETE|MERGE)\b/i;
const RESERVED_CTE = /\bprojection_checkpoint(_missing)?\b/i;

/**
 * The batch's statement with the checkpoint's compare-and-set as data-modifying CTEs ahead of it, which PostgreSQL
 * always runs: one statement, so one transaction and one round trip. A checkpoint no longer at `from`, or no longer
 * there, raises, and the batch's rows roll back with it.
 */
function withCheckpointMove(statement: BatchStatement, name: string, from: bigint, to: bigint): QueryConfig {
  const leadingWith = LEADING_WITH.exec(statement.text);
  if ((!leadingWith && !PLAIN_WRITE.test(statement.text)) || RESERVED_CTE.test(statement.text))
    throw new Error(
      `projection statement ${statement.name}: it must start with WITH and its first CTE's name, INSERT, UPDATE, ` +
        "DELETE or MERGE, and not mention projection_checkpoint or projection_checkpoint_missing (the runner's CTEs)",
    );
  const at = statement.values.length;
  const [nameParam, fromParam, toParam] = [`$${at + 1}`, `$${at + 2}::bigint`, `$${at + 3}::bigint`];
  // The second CTE is an INSERT only so that PostgreSQL runs it; it never inserts: with no stored position the
  // function raises (it must stay neither STRICT nor IMMUTABLE). It asks whether the UPDATE moved a row, not the
  // snapshot: a row deleted while the statement waited on it is in the snapshot, but the UPDATE passes it over.
  const move = `projection_checkpoint AS (
    UPDATE projection_checkpoints SET position = projection_checkpoint_moved(name, position, ${fromParam}, ${toParam}),
      updated_at = now()
     WHERE name = ${nameParam}
     RETURNING 1
  ), projection_checkpoint_missing AS (
    INSERT INTO projection_checkpoints (name, position)
    SELECT ${nameParam}, projection_checkpoint_moved(${nameParam}, NULL, ${fromParam}, ${toParam})
     WHERE NOT EXISTS (SELECT 1 FROM projection_checkpoint))`;
  const text = leadingWith
    ? `WITH ${leadingWith[1] ?? ''}${move},\n${statement.text.slice(leadingWith[0].length)}`
    : `WITH ${move}\n${statement.text}`;
  return {
    name: `${statement.name}:checkpointed`,
    text,
    values: [...statement.values, name, from.toString(), to.toString()],
  };
}

function lockKeyOf(name: string): bigint {
  return createHash('sha256').update(`projection:${name}`).digest().readBigInt64BE(0);
}

/** What `promise` gives, or `undefined` if it has not settled within `ms` (it goes on; await it again). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  if (ms <= 0) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A refusal of what a statement carried (too large a parameter, a value out of range): not the database failing,
 * nor a cancel (the share halves for those), nor a checkpoint another runner moved. Building a statement past what a
 * string holds (about 512 MB) throws a RangeError before it is sent.
 */
function refusedForWhatItHolds(error: unknown): boolean {
  if (error instanceof RangeError) return true;
  return error instanceof pg.DatabaseError && error.code !== CHECKPOINT_MOVED && databaseFailure(error) === undefined;
}
