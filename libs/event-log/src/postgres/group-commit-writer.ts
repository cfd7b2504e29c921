import type { Pool, PoolClient } from 'pg';
import { EMPTY_STREAM, planAppend, type KnownEvent, type SealedEvent, type StreamHead } from '../append-plan.js';
import { EventLogClosedError } from '../errors.js';
import type { AppendResult, ExpectedRevision, NewEvent } from '../event-log.js';
import { EVENT_LOG_CHANNEL } from './postgres-notifier.js';

/** Advisory lock that serializes appends across every process writing to this database. */
export const APPEND_LOCK_KEY = 731_820_101;

interface PendingAppend {
  readonly streamId: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: Error) => void;
}

export interface CommitStats {
  readonly appends: number;
  readonly events: number;
  readonly durationMs: number;
}

export interface GroupCommitOptions {
  /** A commit takes queued appends until it holds this many events (at least one append). */
  readonly maxEventsPerCommit: number;
  readonly clock: () => Date;
  readonly onCommit?: (stats: CommitStats) => void;
}

/**
 * Group commit: appends from all callers queue here and one loop writes them, as many as are
 * waiting, in a single transaction under the append lock. Each caller still gets its own result
 * or its own conflict; an infrastructure failure fails exactly the appends of that transaction,
 * none of which was stored (the transaction rolled back).
 *
 * Delivery guarantee: a resolved append is committed (synchronous commit); a rejected one stored
 * nothing.
 */
export class GroupCommitWriter {
  private queue: PendingAppend[] = [];
  private draining: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly options: GroupCommitOptions,
  ) {}

  append(streamId: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new EventLogClosedError());
    return new Promise((resolve, reject) => {
      this.queue.push({ streamId, events, expected, resolve, reject });
      this.draining ??= this.drain();
    });
  }

  /** Refuses new appends and waits for the queued ones to finish. */
  async close(): Promise<void> {
    this.closed = true;
    await this.draining;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.takeBatch();
        const started = performance.now();
        try {
          const results = await this.commit(batch);
          batch.forEach((pending, index) => {
            const result = results[index]!;
            if (result instanceof Error) pending.reject(result);
            else pending.resolve(result);
          });
          this.options.onCommit?.({
            appends: batch.length,
            events: batch.reduce((sum, pending) => sum + pending.events.length, 0),
            durationMs: performance.now() - started,
          });
        } catch (error) {
          for (const pending of batch) pending.reject(error as Error);
        }
      }
    } finally {
      // Cleared in the same tick as the last look at the queue (callers resume only after it),
      // so no append can be queued behind a loop that has already stopped.
      this.draining = undefined;
    }
  }

  private takeBatch(): PendingAppend[] {
    let events = 0;
    let count = 0;
    while (count < this.queue.length && (count === 0 || events + this.queue[count]!.events.length <= this.options.maxEventsPerCommit)) {
      events += this.queue[count]!.events.length;
      count += 1;
    }
    return this.queue.splice(0, count);
  }

  private async commit(batch: readonly PendingAppend[]): Promise<(AppendResult | Error)[]> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK_KEY]);
      const { heads, known, headPosition } = await readState(client, batch);
      const recordedAt = this.options.clock();
      const rows: { event: SealedEvent; position: bigint }[] = [];
      let position = headPosition;
      const results = batch.map((pending): AppendResult | Error => {
        const head = heads.get(pending.streamId) ?? EMPTY_STREAM;
        const streamKnown = known.get(pending.streamId) ?? new Map<string, KnownEvent>();
        const plan = planAppend(pending.streamId, head, streamKnown, pending.events, pending.expected, recordedAt);
        switch (plan.kind) {
          case 'conflict':
            return plan.error;
          case 'duplicates_only':
            return { nextExpectedRevision: head.revision as bigint, position: plan.lastKnown.position, appended: 0, duplicates: plan.duplicates };
          case 'write':
            for (const event of plan.events) {
              position += 1n;
              rows.push({ event, position });
              streamKnown.set(event.id, { revision: event.revision, position });
            }
            known.set(pending.streamId, streamKnown);
            heads.set(pending.streamId, plan.head);
            return { nextExpectedRevision: plan.head.revision as bigint, position, appended: plan.events.length, duplicates: plan.duplicates };
        }
      });
      if (rows.length > 0) await writeRows(client, rows, heads, position);
      await client.query('COMMIT');
      return results;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
}

async function readState(client: PoolClient, batch: readonly PendingAppend[]) {
  const streamIds = [...new Set(batch.map((pending) => pending.streamId))];
  const headRows = await client.query<{ stream_id: string; revision: string; last_hash: string; position: string }>(
    `SELECT s.stream_id, s.revision, s.last_hash, h.position
       FROM event_log_head h LEFT JOIN event_log_streams s ON s.stream_id = ANY($1::text[])`,
    [streamIds],
  );
  const heads = new Map<string, StreamHead>();
  for (const row of headRows.rows) {
    if (row.stream_id !== null) heads.set(row.stream_id, { revision: BigInt(row.revision), lastHash: row.last_hash });
  }
  const headPosition = BigInt(headRows.rows[0]!.position);

  // Only streams that exist can hold duplicates.
  const keys = batch.filter((pending) => heads.has(pending.streamId)).flatMap((pending) => pending.events.map((event) => [pending.streamId, event.id] as const));
  const known = new Map<string, Map<string, KnownEvent>>();
  if (keys.length > 0) {
    const existing = await client.query<{ stream_id: string; event_id: string; revision: string; position: string }>(
      `SELECT e.stream_id, e.event_id, e.revision, e.position
         FROM unnest($1::text[], $2::uuid[]) AS k(stream_id, event_id)
         JOIN event_log_events e ON e.stream_id = k.stream_id AND e.event_id = k.event_id`,
      [keys.map(([streamId]) => streamId), keys.map(([, id]) => id)],
    );
    for (const row of existing.rows) {
      const streamKnown = known.get(row.stream_id) ?? new Map<string, KnownEvent>();
      streamKnown.set(row.event_id, { revision: BigInt(row.revision), position: BigInt(row.position) });
      known.set(row.stream_id, streamKnown);
    }
  }
  return { heads, known, headPosition };
}

/** One statement: the events, the stream heads, the log head, and the wake-up notification (sent at commit). */
async function writeRows(client: PoolClient, rows: readonly { event: SealedEvent; position: bigint }[], heads: ReadonlyMap<string, StreamHead>, lastPosition: bigint) {
  const touched = [...new Set(rows.map((row) => row.event.streamId))];
  const column = <T>(pick: (row: { event: SealedEvent; position: bigint }) => T) => rows.map(pick);
  await client.query(
    `WITH inserted AS (
       INSERT INTO event_log_events
         (position, stream_id, revision, event_id, type, data, recorded_at, schema_version, correlation_id, causation_id, actor, tenant, prev_hash, hash)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::uuid[], $5::text[], $6::jsonb[], $7::timestamptz[], $8::int[],
                            $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[])
       RETURNING 1
     ), streams AS (
       INSERT INTO event_log_streams (stream_id, revision, last_hash)
       SELECT * FROM unnest($15::text[], $16::bigint[], $17::text[])
       ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash
       RETURNING 1
     ), head AS (
       UPDATE event_log_head SET position = $18 RETURNING position
     )
     SELECT pg_notify('${EVENT_LOG_CHANNEL}', (SELECT position FROM head)::text), (SELECT count(*) FROM inserted), (SELECT count(*) FROM streams)`,
    [
      column((row) => row.position.toString()),
      column((row) => row.event.streamId),
      column((row) => row.event.revision.toString()),
      column((row) => row.event.id),
      column((row) => row.event.type),
      column((row) => JSON.stringify(row.event.data)),
      column((row) => row.event.metadata.recordedAt),
      column((row) => row.event.metadata.schemaVersion),
      column((row) => row.event.metadata.correlationId),
      column((row) => row.event.metadata.causationId),
      column((row) => row.event.metadata.actor),
      column((row) => row.event.metadata.tenant),
      column((row) => row.event.metadata.prevHash),
      column((row) => row.event.metadata.hash),
      touched,
      touched.map((streamId) => (heads.get(streamId)!.revision as bigint).toString()),
      touched.map((streamId) => heads.get(streamId)!.lastHash),
      lastPosition.toString(),
    ],
  );
}
