import type { EventLog } from '#event-log';
import type { Pool } from 'pg';
import { inTransaction } from '../database/transaction.js';
import type { ProjectionDefinition } from './projection.js';

export interface RebuildResult {
  readonly events: number;
  readonly position: bigint;
  readonly durationMs: number;
}

const READ_PAGE = 5_000;

/**
 * Rebuilds a projection's tables from the log while the service keeps serving reads: folds
 * everything into fresh copies of the tables in a scratch schema (the projection's SQL is
 * unqualified, so `search_path` points it there), then swaps them in under table locks after
 * catching up with whatever arrived meanwhile. Moving the checkpoint to the rebuild's position
 * makes a live runner's compare-and-set fail, so it restarts from there (decision 0005).
 */
export async function rebuildProjection(pool: Pool, eventLog: EventLog, definition: ProjectionDefinition, tables: readonly string[]): Promise<RebuildResult> {
  const started = performance.now();
  const schema = `rebuild_${definition.name.replace(/\W/g, '_')}_${Date.now()}`;
  definition.reset();
  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    for (const table of tables) await pool.query(`CREATE TABLE ${schema}.${table} (LIKE public.${table} INCLUDING ALL)`);
    let position = 0n;
    let events = 0;
    // Bulk of the work, outside any lock: readers keep using the live tables.
    for (;;) {
      const page = await eventLog.readAll({ fromPosition: position, maxCount: READ_PAGE, filter: definition.filter });
      await inTransaction(pool, async (client) => {
        await client.query(`SET LOCAL search_path = ${schema}, public`);
        if (page.events.length > 0) await definition.handle(page.events, { client, eventLog });
      });
      events += page.events.length;
      position = page.checkpoint;
      if (page.caughtUp) break;
    }
    // Swap: hold the live tables (waits for a runner's open batch), catch up, move the checkpoint, rename.
    await inTransaction(pool, async (client) => {
      await client.query(`LOCK TABLE ${tables.map((table) => `public.${table}`).join(', ')}, public.projection_checkpoints IN ACCESS EXCLUSIVE MODE`);
      await client.query(`SET LOCAL search_path = ${schema}, public`);
      for (;;) {
        const page = await eventLog.readAll({ fromPosition: position, maxCount: READ_PAGE, filter: definition.filter });
        if (page.events.length > 0) await definition.handle(page.events, { client, eventLog });
        events += page.events.length;
        position = page.checkpoint;
        if (page.caughtUp) break;
      }
      for (const table of tables) {
        await client.query(`DROP TABLE public.${table}`);
        await client.query(`ALTER TABLE ${schema}.${table} SET SCHEMA public`);
      }
      await client.query(
        `INSERT INTO public.projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = now()`,
        [definition.name, position.toString()],
      );
    });
    return { events, position, durationMs: performance.now() - started };
  } finally {
    definition.reset();
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}
