import type pg from 'pg';
import { eventually } from './probe.js';

/** Waits for the Merkle consumer to add the leaves of the events at `positions`: a signing then sees them. */
export async function leavesAdded(db: pg.Client, positions: readonly bigint[]): Promise<void> {
  await eventually('the Merkle consumer added the leaves', async () => {
    const { rows } = await db.query<{ leaves: number }>(
      'SELECT count(*)::int AS leaves FROM log_leaves WHERE position = ANY($1::bigint[])',
      [positions.map(String)],
    );
    return rows[0].leaves === positions.length || undefined;
  });
}
