import type { EventLog, RecordedEvent } from '#event-log';
import { expect } from '@jest/globals';
import type pg from 'pg';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import type { LedgerUnderTest } from './ledger-http.js';
import { eventually } from './probe.js';

/** The signing lock the service takes (`verifiable-log.ts`): held while tampering, the signer sees all of it or none. */
export const SIGNING_LOCK_KEY = 7_318_201_017;

/** Runs `change` in one transaction of `db` holding the signing lock. */
export async function underSigningLock(db: pg.Client, change: () => Promise<void>): Promise<void> {
  await db.query('BEGIN');
  await db.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
  await change();
  await db.query('COMMIT');
}

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

/** A new session with a user message for each of `contents`, once the Merkle consumer has added its events' leaves. */
export async function recordedWithLeaves(
  ledger: LedgerUnderTest,
  db: pg.Client,
  sessionId: string,
  contents: readonly string[] = ['one', 'two'],
): Promise<readonly RecordedEvent[]> {
  expect((await ledger.request('POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
  for (const content of contents) {
    const created = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content });
    expect(created.status).toBe(201);
  }
  const events = await ledger.app.get<EventLog>(EVENT_LOG).readStream(`session-${sessionId}`);
  await leavesAdded(
    db,
    events.map((event) => event.position),
  );
  return events;
}
