import pg, { type Pool, type PoolClient } from 'pg';
import {
  appendResult,
  EMPTY_STREAM,
  planAppend,
  type KnownEvent,
  type SealedEvent,
  type StreamHead,
} from '../append-plan.js';
import { BatchingQueue } from '../batching-queue.js';
import type { AppendResult, ExpectedRevision, NewEvent } from '../event-log.js';
import { EVENT_LOG_CHANNEL } from './postgres-notifier.js';

/** Advisory lock that serializes appends across every process writing to this database. */
export const APPEND_LOCK_KEY = 731_820_101;

interface PendingAppend {
  readonly streamId: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
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
 * or its own conflict. A transaction the server refuses rolls back whole and is retried in
 * halves, so only the append that caused it fails; losing the server fails exactly the appends
 * of that transaction, none of which was stored.
 *
 * Delivery guarantee: a resolved append is committed (synchronous commit); a rejected one stored
 * nothing.
 */
export class GroupCommitWriter {
  private readonly queue: BatchingQueue<PendingAppend, AppendResult>;

  constructor(
    private readonly pool: Pool,
    private readonly options: GroupCommitOptions,
  ) {
    this.queue = new BatchingQueue((batch) => this.commitMeasured(batch), {
      batchSize: (waiting) => {
        let events = 0;
        let count = 0;
        const fits = (next: PendingAppend) => events + next.events.length <= options.maxEventsPerCommit;
        while (count < waiting.length && (count === 0 || fits(waiting[count]))) {
          events += waiting[count].events.length;
          count += 1;
        }
        return count;
      },
      // The server refused the statement: one append's data may be the cause (jsonb refuses NUL,
      // a value over a limit). A failure to reach the server fails the batch whole.
      splitOnFailure: (error) => error instanceof pg.DatabaseError,
    });
  }

  append(streamId: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    return this.queue.push({ streamId, events, expected });
  }

  /** Refuses new appends and waits for the queued ones to finish. */
  close(): Promise<void> {
    return this.queue.close();
  }

  private async commitMeasured(batch: readonly PendingAppend[]): Promise<(AppendResult | Error)[]> {
    const started = performance.now();
    const results = await this.commit(batch);
    this.options.onCommit?.({
      appends: batch.length,
      events: batch.reduce((sum, pending) => sum + pending.events.length, 0),
      durationMs: performance.now() - started,
    });
    return results;
  }

  /**
   * Four short round trips: BEGIN with the append lock, the state read, the write, COMMIT. The
   * state read and the write are named prepared statements: planning them fresh each time costs
   * more than a round trip. The lock is taken before the state read, whose snapshot therefore
   * sees every commit made before it.
   */
  private async commit(batch: readonly PendingAppend[]): Promise<(AppendResult | Error)[]> {
    const client = await this.pool.connect();
    try {
      const { heads, known, headPosition } = await lockAndReadState(client, batch);
      const recordedAt = this.options.clock();
      const rows: { event: SealedEvent; position: bigint }[] = [];
      let position = headPosition;
      const results = batch.map((pending): AppendResult | Error => {
        const head = heads.get(pending.streamId) ?? EMPTY_STREAM;
        const streamKnown = known.get(pending.streamId) ?? new Map<string, KnownEvent>();
        const plan = planAppend(pending.streamId, head, streamKnown, pending.events, pending.expected, recordedAt);
        if (plan.kind === 'write') {
          for (const event of plan.events) {
            position += 1n;
            rows.push({ event, position });
            streamKnown.set(event.id, { revision: event.revision, position });
          }
          known.set(pending.streamId, streamKnown);
          heads.set(pending.streamId, plan.head);
        }
        return appendResult(plan, head.revision, position);
      });
      if (rows.length > 0) await client.query(writeStatement(rows, heads, position));
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

interface StateRow {
  kind: 'log' | 'stream' | 'event';
  stream_id: string | null;
  event_id: string | null;
  revision: string;
  last_hash: string | null;
  position: string | null;
}

const STATE_SQL = `
  SELECT 'log' AS kind, NULL::text AS stream_id, NULL::uuid AS event_id, position AS revision, NULL::text AS last_hash, position FROM event_log_head
  UNION ALL
  SELECT 'stream', stream_id, NULL, revision, last_hash, NULL FROM event_log_streams WHERE stream_id = ANY($1::text[])
  UNION ALL
  SELECT 'event', stream_id, event_id, revision, NULL, position FROM event_log_events
   WHERE stream_id = ANY($1::text[]) AND event_id = ANY($2::uuid[])`;

/** Opens the transaction, takes the append lock, then reads the log head, the heads of the batch's streams, and which of its event ids they already hold. */
async function lockAndReadState(client: PoolClient, batch: readonly PendingAppend[]) {
  const streamIds = [...new Set(batch.map((pending) => pending.streamId))];
  // Both conditions are index conditions on (stream_id, event_id), whatever plan is cached. An id
  // found in another stream of the batch lands under that stream and matches nothing here.
  const eventIds = batch.flatMap((pending) => pending.events.map((event) => event.id));
  await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK_KEY})`);
  const { rows } = await client.query<StateRow>({
    name: 'event-log-append-state',
    text: STATE_SQL,
    values: [streamIds, eventIds],
  });
  const heads = new Map<string, StreamHead>();
  const known = new Map<string, Map<string, KnownEvent>>();
  let headPosition = 0n;
  for (const row of rows) {
    if (row.kind === 'log') headPosition = BigInt(row.position!);
    else if (row.kind === 'stream')
      heads.set(row.stream_id!, { revision: BigInt(row.revision), lastHash: row.last_hash! });
    else {
      const streamKnown = known.get(row.stream_id!) ?? new Map<string, KnownEvent>();
      streamKnown.set(row.event_id!, { revision: BigInt(row.revision), position: BigInt(row.position!) });
      known.set(row.stream_id!, streamKnown);
    }
  }
  return { heads, known, headPosition };
}

const WRITE_SQL = `
  WITH inserted AS (
    INSERT INTO event_log_events
      (position, stream_id, revision, event_id, type, data, recorded_at, schema_version, correlation_id, causation_id, actor, tenant, prev_hash, hash)
    SELECT position, stream_id, revision, event_id, type, data, recorded_at, schema_version, correlation_id, causation_id, actor, tenant, prev_hash, hash
      FROM jsonb_to_recordset($1::jsonb) AS r(position bigint, stream_id text, revision bigint, event_id uuid, type text, data jsonb,
           recorded_at timestamptz, schema_version int, correlation_id text, causation_id text, actor text, tenant text, prev_hash text, hash text)
    RETURNING 1
  ), streams AS (
    INSERT INTO event_log_streams (stream_id, revision, last_hash)
    SELECT stream_id, revision, last_hash FROM jsonb_to_recordset($2::jsonb) AS s(stream_id text, revision bigint, last_hash text)
    ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision, last_hash = excluded.last_hash
    RETURNING 1
  ), head AS (
    UPDATE event_log_head SET position = $3 RETURNING position
  )
  SELECT pg_notify('${EVENT_LOG_CHANNEL}', (SELECT position FROM head)::text), (SELECT count(*) FROM inserted), (SELECT count(*) FROM streams)`;

/**
 * The events, the stream heads, the log head, and the wake-up notification (sent at commit), as
 * one statement. Rows travel as one JSON document that PostgreSQL unpacks itself, far cheaper
 * than the driver serializing a parameter array per column.
 */
function writeStatement(
  rows: readonly { event: SealedEvent; position: bigint }[],
  heads: ReadonlyMap<string, StreamHead>,
  lastPosition: bigint,
) {
  const events = rows.map(({ event, position }) => ({
    position: position.toString(),
    stream_id: event.streamId,
    revision: event.revision.toString(),
    event_id: event.id,
    type: event.type,
    data: event.data,
    recorded_at: event.metadata.recordedAt,
    schema_version: event.metadata.schemaVersion,
    correlation_id: event.metadata.correlationId,
    causation_id: event.metadata.causationId,
    actor: event.metadata.actor,
    tenant: event.metadata.tenant,
    prev_hash: event.metadata.prevHash,
    hash: event.metadata.hash,
  }));
  const streams = [...new Set(rows.map((row) => row.event.streamId))].map((streamId) => {
    const head = heads.get(streamId)!;
    return { stream_id: streamId, revision: (head.revision as bigint).toString(), last_hash: head.lastHash };
  });
  return {
    name: 'event-log-append-write',
    text: WRITE_SQL,
    values: [JSON.stringify(events), JSON.stringify(streams), lastPosition.toString()],
  };
}
