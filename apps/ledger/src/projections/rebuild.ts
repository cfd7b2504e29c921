import type { EventLog, ProjectionEvent, ReadAllResult } from '#event-log';
import pg, { type Pool, type PoolClient } from 'pg';
import { inTransaction } from '../database/transaction.js';
import { handleBatch, type ProjectionDefinition } from './projection.js';
import { setStoredCheckpoint } from './projection-runner.js';

export interface RebuildResult {
  readonly events: number;
  readonly position: bigint;
  readonly durationMs: number;
}

/**
 * Events a rebuild reads at a time (and up to two such pages ahead). Each page's changed rows are
 * written once: larger pages write a growing block fewer times (10,000 against 5,000: 1.08× the
 * events/s, decision 0034). A page also stops at the log's byte bound (decision 0036), so the
 * three pages hold at most a few times that bound.
 */
export const REBUILD_PAGE = 10_000;
/** Pages read while the one before them is folded and written; with one, the bound on each page's bytes cost a tenth of the rebuild's speed (decision 0036). */
const PAGES_READ_AHEAD = 2;
/** Held (session advisory lock) by whichever process is rebuilding; released by PostgreSQL if that process dies. */
const REBUILD_LOCK_KEY = 7_318_201_001;
/** Attempts the swap makes at the live tables: PostgreSQL may choose it to end a deadlock four times in a row. */
const SWAP_LOCK_ATTEMPTS = 5;
const DEADLOCK_DETECTED = '40P01';
/** Scratch schemas are the ledger's own: any left behind is a killed rebuild's. */
const SCRATCH_SCHEMA_PREFIX = 'rebuild_';

/** Rebuilds started in this process queue here first, so a queue of them holds one pooled connection, not one each. */
let previousInProcess: Promise<unknown> = Promise.resolve();

/**
 * Rebuilds a projection's tables from the log while the service keeps serving reads: folds
 * everything into fresh copies of the tables in a scratch schema (the projection's SQL is
 * unqualified, so `search_path` points it there), then swaps them in under table locks after
 * catching up with whatever arrived meanwhile. Moving the checkpoint to the rebuild's position
 * makes a live runner's compare-and-set fail, so it restarts from there (decision 0005).
 *
 * One rebuild runs at a time across processes and instances: a second one waits for the first
 * to finish, then rebuilds again (decision 0012). Scratch schemas left by a killed rebuild are
 * dropped before each rebuild.
 */
export function rebuildProjection(
  pool: Pool,
  eventLog: EventLog,
  definition: ProjectionDefinition<ProjectionEvent>,
  tables: readonly string[],
  pageSize = REBUILD_PAGE,
): Promise<RebuildResult> {
  const turn = previousInProcess.then(async () => {
    const result = await withRebuildLock(pool, 'wait', async () => {
      await dropScratchSchemas(pool);
      return rebuildIntoScratchSchema(pool, eventLog, definition, tables, pageSize);
    });
    return result!;
  });
  previousInProcess = turn.catch(() => undefined);
  return turn;
}

/**
 * Drops the scratch schemas a killed rebuild left behind, unless a rebuild is running right now
 * (then it is not a leftover, and the next rebuild drops what remains). Called at startup.
 */
export async function dropLeftoverScratchSchemas(pool: Pool): Promise<void> {
  await withRebuildLock(pool, 'skip-if-held', () => dropScratchSchemas(pool));
}

/** Runs `work` holding the rebuild lock: waiting for it, or giving up (undefined) if another session holds it. */
async function withRebuildLock<T>(
  pool: Pool,
  mode: 'wait' | 'skip-if-held',
  work: () => Promise<T>,
): Promise<T | undefined> {
  const lock = await pool.connect();
  let broken: Error | undefined;
  try {
    if (mode === 'wait') await lock.query('SELECT pg_advisory_lock($1)', [REBUILD_LOCK_KEY]);
    else {
      const { rows } = await lock.query<{ free: boolean }>('SELECT pg_try_advisory_lock($1) AS free', [
        REBUILD_LOCK_KEY,
      ]);
      if (!rows[0].free) return undefined;
    }
    try {
      return await work();
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [REBUILD_LOCK_KEY]).catch((error: Error) => (broken = error));
    }
  } finally {
    // A connection whose unlock failed is not reused: closing it releases the lock.
    lock.release(broken);
  }
}

/** Only while holding the rebuild lock: every scratch schema then is a leftover. */
async function dropScratchSchemas(pool: Pool): Promise<void> {
  const { rows } = await pool.query<{ name: string }>(
    'SELECT nspname AS name FROM pg_namespace WHERE starts_with(nspname, $1)',
    [SCRATCH_SCHEMA_PREFIX],
  );
  for (const { name } of rows) await pool.query(`DROP SCHEMA IF EXISTS "${name.replaceAll('"', '""')}" CASCADE`);
}

async function rebuildIntoScratchSchema(
  pool: Pool,
  eventLog: EventLog,
  definition: ProjectionDefinition<ProjectionEvent>,
  tables: readonly string[],
  pageSize: number,
): Promise<RebuildResult> {
  const started = performance.now();
  const schema = `${SCRATCH_SCHEMA_PREFIX}${definition.name.replace(/\W/g, '_')}`;
  definition.reset();
  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    for (const table of tables)
      await pool.query(`CREATE TABLE ${schema}.${table} (LIKE public.${table} INCLUDING ALL)`);
    let position = 0n;
    let events = 0;
    const read = (after: bigint) =>
      eventLog.readAllForProjections({ fromPosition: after, maxCount: pageSize, filter: definition.filter });
    // Bulk of the work, outside any lock: readers keep using the live tables. The next pages are
    // read while this one is folded and written, all in one transaction.
    await inTransaction(pool, async (client) => {
      await client.query(`SET LOCAL search_path = ${schema}, public`);
      const pages = readAhead(read, position, PAGES_READ_AHEAD);
      try {
        for (;;) {
          const page = await pages.next();
          if (page.events.length > 0) await handleBatch(definition, page.events, { client, eventLog });
          events += page.events.length;
          position = page.checkpoint;
          if (page.caughtUp) break;
        }
      } finally {
        pages.stop();
      }
    });
    // The fresh tables have no statistics: analyzed before the swap, outside the lock, they are planned
    // on what they hold from the start, not from whenever autovacuum comes round.
    await pool.query(`ANALYZE ${tables.map((table) => `${schema}.${table}`).join(', ')}`);
    // Swap: hold the live tables (waits for a runner's open batch), catch up, move the checkpoint, rename.
    await inTransaction(pool, async (client) => {
      await lockLiveTables(client, tables);
      await client.query(`SET LOCAL search_path = ${schema}, public`);
      for (;;) {
        const page = await read(position);
        if (page.events.length > 0) await handleBatch(definition, page.events, { client, eventLog });
        events += page.events.length;
        position = page.checkpoint;
        if (page.caughtUp) break;
      }
      for (const table of tables) {
        await client.query(`DROP TABLE public.${table}`);
        await client.query(`ALTER TABLE ${schema}.${table} SET SCHEMA public`);
      }
      await setStoredCheckpoint(client, definition.name, position);
    });
    return { events, position, durationMs: performance.now() - started };
  } finally {
    definition.reset();
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}

/**
 * Takes the live tables and the checkpoints for the swap, waiting for whoever holds them. A runner's write locks
 * its tables in an order of PostgreSQL's choosing (as written when first planned, its target first once prepared),
 * so the swap, which locks them one after the other, can close a deadlock with it. When PostgreSQL ends one by
 * failing the swap's lock, that lock lets go of the tables it had taken; the swap goes back to its savepoint and
 * takes them again.
 */
async function lockLiveTables(client: PoolClient, tables: readonly string[]): Promise<void> {
  const live = [...tables.map((table) => `public.${table}`), 'public.projection_checkpoints'];
  await client.query('SAVEPOINT live_tables');
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.query(`LOCK TABLE ${live.join(', ')} IN ACCESS EXCLUSIVE MODE`);
      // The rest of the swap runs in the transaction itself, not in a subtransaction.
      await client.query('RELEASE SAVEPOINT live_tables');
      return;
    } catch (error) {
      const deadlock = error instanceof pg.DatabaseError && error.code === DEADLOCK_DETECTED;
      if (!deadlock || attempt >= SWAP_LOCK_ATTEMPTS) throw error;
      await client.query('ROLLBACK TO SAVEPOINT live_tables');
    }
  }
}

/**
 * Reads pages one after the other from `from`, each as soon as the one before it has come back,
 * keeping up to `depth` pages read or in flight beyond the one last taken. `next` gives them in
 * order; a read that fails fails the `next` that takes it (and no read follows it). After `stop`,
 * no read starts: the reads under way finish, and nothing takes them.
 */
function readAhead<Page extends Pick<ReadAllResult, 'caughtUp' | 'checkpoint'>>(
  read: (after: bigint) => Promise<Page>,
  from: bigint,
  depth: number,
) {
  const ahead: Promise<Page | undefined>[] = [];
  let stopped = false;
  const extend = () => {
    while (ahead.length < depth) {
      const previous = ahead.at(-1);
      const page: Promise<Page | undefined> = previous
        ? previous.then((last) => (!stopped && last && !last.caughtUp ? read(last.checkpoint) : undefined))
        : read(from);
      // Handled when taken; until then a failure must not count as unhandled.
      page.catch(() => undefined);
      ahead.push(page);
    }
  };
  extend();
  return {
    async next(): Promise<Page> {
      const page = await ahead.shift()!;
      extend();
      return page!;
    },
    stop: () => {
      stopped = true;
    },
  };
}
