import pg, { type Pool, type PoolClient } from 'pg';
import {
  appendResult,
  EMPTY_STREAM,
  planAppend,
  recordedEvent,
  type AppendPlan,
  type KnownEvent,
  type PreparedAppend,
  type SealedEvent,
  type StreamHead,
} from '../append-plan.js';
import { readBack, rememberNewest } from '#core';
import { BatchingQueue } from '../batching-queue.js';
import { databaseFailure } from './database-failure.js';
import { NO_STREAM, type AppendResult, type RecordedEvent, type StreamState } from '../event-log.js';
import { EVENT_LOG_CHANNEL } from './postgres-notifier.js';
import type { RecentCommits } from './recent-commits.js';

/** Advisory lock that serializes appends across every process writing to this database. */
export const APPEND_LOCK_KEY = 731_820_101;

/** One caller's append: one stream's part or several, stored all or none. */
type PendingAppend = readonly PreparedAppend[];

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
  /** Where each commit's stored events go, as a read of the log would give them, for this instance's subscriptions. */
  readonly recent?: RecentCommits;
}

/**
 * Group commit: appends from all callers queue here and one loop writes them, as many as are
 * waiting, in a single transaction under the append lock (usually one statement, see `commit`),
 * and learns their positions from that statement. Each commit is taken a turn of the event loop
 * after the last one settled, so that the appenders it woke are all in the next (decision 0039).
 * Each caller still gets its own result or its own conflict. A transaction the server refuses rolls
 * back whole and is retried in halves, so only the append that caused it fails; losing the server
 * fails exactly the appends of that transaction, none of which was stored.
 *
 * Delivery guarantee: a resolved append is committed (synchronous commit); a rejected one stored
 * nothing.
 */
export class GroupCommitWriter {
  private readonly queue: BatchingQueue<PendingAppend, AppendResult[]>;
  /** Where each stream this writer last wrote or read stands, so that most commits need not read. */
  private readonly heads = new Map<string, StreamHead>();

  constructor(
    private readonly pool: Pool,
    private readonly options: GroupCommitOptions,
  ) {
    this.queue = new BatchingQueue((batch) => this.commitMeasured(batch), {
      batchSize: (waiting) => {
        let events = 0;
        let count = 0;
        const fits = (next: PendingAppend) => events + eventCount(next) <= options.maxEventsPerCommit;
        while (count < waiting.length && (count === 0 || fits(waiting[count]))) {
          events += eventCount(waiting[count]);
          count += 1;
        }
        return count;
      },
      // The server refused the statement: one append's data may be the cause (jsonb refuses NUL,
      // a value over a limit). A failure to reach the server, a connection that broke (the batch may have
      // committed) or a server that cannot serve fails the batch whole.
      splitOnFailure: (error) => error instanceof pg.DatabaseError && databaseFailure(error) === undefined,
      gatherTurn: true,
    });
  }

  /** Several streams' parts, in one transaction: all stored, or none and the first conflict. */
  append(appends: readonly PreparedAppend[]): Promise<AppendResult[]> {
    return this.queue.push(appends);
  }

  /** Refuses new appends and waits for the queued ones to finish. */
  close(): Promise<void> {
    return this.queue.close();
  }

  private async commitMeasured(batch: readonly PendingAppend[]): Promise<(AppendResult[] | Error)[]> {
    const started = performance.now();
    const committing = this.commit(batch);
    this.options.recent?.committing(committing);
    const results = await committing;
    this.options.onCommit?.({
      appends: batch.length,
      events: batch.reduce((sum, pending) => sum + eventCount(pending), 0),
      durationMs: performance.now() - started,
    });
    return results;
  }

  /**
   * One round trip when this writer knows where the batch's streams stand (it wrote or read them
   * last): the batch is planned against those heads and `event_log_append` stores it only if the
   * streams are still there. Otherwise (a stream it never saw, another process wrote meanwhile, an
   * event id already stored, a conflict that only the truth can confirm) the batch is planned
   * again on what the database holds, under the append lock.
   */
  private async commit(batch: readonly PendingAppend[]): Promise<(AppendResult[] | Error)[]> {
    try {
      const planned = this.planFromCache(batch);
      if (planned) {
        const base = await this.tryStore(this.pool, planned);
        if (base !== null) return this.settle(planned, base);
      }
      return await this.commitUnderLock(batch);
    } catch (error) {
      for (const { streamId } of batch.flat()) this.heads.delete(streamId);
      throw error;
    }
  }

  private planFromCache(batch: readonly PendingAppend[]): PlannedBatch | undefined {
    const fresh = batch
      .flat()
      .every(({ streamId, expectedRevision }) => this.heads.has(streamId) || expectedRevision === NO_STREAM);
    if (!fresh) return undefined;
    const planned = planBatch(
      batch,
      (streamId) => this.heads.get(streamId) ?? EMPTY_STREAM,
      new Map(),
      this.options.clock(),
    );
    return planned.outcomes.flat().every(({ plan }) => plan.kind === 'write') ? planned : undefined;
  }

  /** The batch planned on the stored heads and event ids, read under the append lock, then stored in the same transaction. */
  private async commitUnderLock(batch: readonly PendingAppend[]): Promise<(AppendResult[] | Error)[]> {
    const client = await this.pool.connect();
    try {
      const { heads, known, headPosition } = await lockAndReadState(client, batch);
      const planned = planBatch(
        batch,
        (streamId) => heads.get(streamId) ?? EMPTY_STREAM,
        known,
        this.options.clock(),
        headPosition,
      );
      if (planned.rows.length > 0 && (await this.tryStore(client, planned)) !== headPosition)
        throw new Error('event_log_append disagreed with the state read under the append lock');
      await client.query('COMMIT');
      for (const [streamId, head] of heads) this.remember(streamId, head);
      return this.settle(planned, headPosition);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** Stores the planned events; the log head they were numbered after, or null when a stream had moved or an event id was already stored. */
  private async tryStore(runner: Pool | PoolClient, planned: PlannedBatch): Promise<bigint | null> {
    try {
      const { rows } = await runner.query<{ head: string | null }>(appendStatement(planned));
      return rows[0].head === null ? null : BigInt(rows[0].head);
    } catch (error) {
      if (error instanceof pg.DatabaseError && error.code === UNIQUE_VIOLATION && runner === this.pool) return null;
      throw error;
    }
  }

  /**
   * After the commit: each caller's result, and the stored events to `recent`, their data as read
   * back from the JSON that was stored (large data copied to the same value instead, `LARGE_TEXT`).
   */
  private settle(planned: PlannedBatch, base: bigint): (AppendResult[] | Error)[] {
    for (const [streamId, head] of planned.after) this.remember(streamId, head);
    const positionOf = (event: SealedEvent) => base + BigInt(planned.ordinals.get(event)!);
    if (planned.rows.length > 0 && this.options.recent?.followed) {
      let dataSize = 0;
      const stored = planned.rows.map((event, index): RecordedEvent => {
        const text = planned.dataJson[index];
        dataSize += text.length;
        return recordedEvent(event, positionOf(event), readBack(event.data, text));
      });
      this.options.recent.add(base, stored, dataSize);
    }
    return planned.outcomes.map((parts) => {
      const conflict = parts.find(({ plan }) => plan.kind === 'conflict');
      if (conflict?.plan.kind === 'conflict') return conflict.plan.error;
      return parts.map(({ plan, headBefore }) => appendResult(plan, headBefore, positionOf) as AppendResult);
    });
  }

  private remember(streamId: string, head: StreamHead): void {
    rememberNewest(this.heads, streamId, head, MAX_CACHED_STREAMS);
  }
}

const UNIQUE_VIOLATION = '23505';

const eventCount = (pending: PendingAppend) => pending.reduce((sum, { events }) => sum + events.length, 0);
/** Stream heads a writer keeps: enough for every session streaming at once, a few hundred kilobytes. */
const MAX_CACHED_STREAMS = 10_000;

interface PlannedBatch {
  /** Per pending append, its parts' plans; an append with a conflicting part stores none of them. */
  readonly outcomes: readonly (readonly { readonly plan: AppendPlan; readonly headBefore: StreamState }[])[];
  /** The events to store, in position order; each one's 1-based ordinal in `ordinals`. */
  readonly rows: readonly SealedEvent[];
  readonly ordinals: ReadonlyMap<SealedEvent, number>;
  /** Each row's data as the canonical JSON its hash covers, made when the append was called: what is stored. */
  readonly dataJson: readonly string[];
  /** Where each written stream stood when planned (the store checks it), and where it will stand. */
  readonly before: ReadonlyMap<string, StreamHead>;
  readonly after: ReadonlyMap<string, StreamHead>;
}

/**
 * Plans each append of the batch in order on the heads given, each append seeing the ones before
 * it. With `base` (the log head, known under the lock), events the batch itself stores count as
 * known for later appends, at their future positions. An append's parts are planned on copies and
 * kept only if none conflicts, so a multi-stream append is stored whole or not at all.
 */
function planBatch(
  batch: readonly PendingAppend[],
  headOf: (streamId: string) => StreamHead,
  known: Map<string, Map<string, KnownEvent>>,
  recordedAt: Date,
  base = -1n,
): PlannedBatch {
  const rows: SealedEvent[] = [];
  const dataJson: string[] = [];
  const ordinals = new Map<SealedEvent, number>();
  const before = new Map<string, StreamHead>();
  const after = new Map<string, StreamHead>();
  const outcomes = batch.map((parts) => {
    const planned = new Map<string, StreamHead>();
    const plannedKnown = new Map<string, Map<string, KnownEvent>>();
    const plannedRows: SealedEvent[] = [];
    const plannedJson: string[] = [];
    const outcome = parts.map(({ streamId, events, expectedRevision }) => {
      const head = planned.get(streamId) ?? after.get(streamId) ?? headOf(streamId);
      const streamKnown = plannedKnown.get(streamId) ?? new Map(known.get(streamId));
      const plan = planAppend(streamId, head, streamKnown, events, expectedRevision, recordedAt);
      if (plan.kind === 'write') {
        plan.events.forEach((event, index) => {
          plannedRows.push(event);
          plannedJson.push(plan.dataJson[index]);
          streamKnown.set(event.id, {
            revision: event.revision,
            position: base + BigInt(rows.length + plannedRows.length),
          });
        });
        plannedKnown.set(streamId, streamKnown);
        planned.set(streamId, plan.head);
      }
      return { plan, headBefore: head.revision };
    });
    if (outcome.some(({ plan }) => plan.kind === 'conflict')) return outcome;
    plannedRows.forEach((event, index) => {
      rows.push(event);
      dataJson.push(plannedJson[index]);
      ordinals.set(event, rows.length);
    });
    for (const [streamId, head] of planned) {
      if (!before.has(streamId)) before.set(streamId, headOf(streamId));
      after.set(streamId, head);
    }
    for (const [streamId, streamKnown] of plannedKnown) known.set(streamId, streamKnown);
    return outcome;
  });
  return { outcomes, rows, ordinals, dataJson, before, after };
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
  SELECT 'stream', stream_id, NULL, revision, encode(last_hash, 'hex'), NULL
    FROM event_log_streams WHERE stream_id = ANY($1::text[])
  UNION ALL
  SELECT 'event', s.stream_id, e.event_id, e.revision, NULL, e.position
    FROM event_log_events e JOIN event_log_streams s USING (stream_key)
   WHERE s.stream_id = ANY($1::text[]) AND e.event_id = ANY($2::uuid[])`;

/** Opens the transaction, takes the append lock, then reads the log head, the heads of the batch's streams, and which of its event ids they already hold. */
async function lockAndReadState(client: PoolClient, batch: readonly PendingAppend[]) {
  const streamIds = [...new Set(batch.flat().map(({ streamId }) => streamId))];
  // Both conditions are index conditions on (stream_key, event_id), whatever plan is cached. An id
  // found in another stream of the batch lands under that stream and matches nothing here.
  const eventIds = batch.flat().flatMap(({ events }) => events.map((event) => event.id));
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

/**
 * The whole store as one call of `event_log_append` (migrations 1763800000250 and 1763800000340).
 * Rows travel as JSON documents that PostgreSQL unpacks itself, far cheaper than the driver
 * serializing a parameter array per column; each stream and each distinct envelope (tenant, actor,
 * correlation id) once, numbered, and the events naming them by number.
 */
function appendStatement(planned: PlannedBatch) {
  const streamNumbers = new Map<string, number>();
  const streams = [...planned.after].map(([streamId, head], n) => {
    streamNumbers.set(streamId, n);
    const stored = planned.before.get(streamId)!;
    const existed = stored.revision !== NO_STREAM;
    return {
      n,
      stream_id: streamId,
      expected_revision: existed ? stored.revision.toString() : null,
      expected_hash: existed ? stored.lastHash : null,
      revision: (head.revision as bigint).toString(),
      last_hash: head.lastHash,
    };
  });
  const envelopeNumbers = new Map<string, number>();
  const envelopes: { n: number; tenant: string; actor: string; correlation_id: string | null }[] = [];
  const events = planned.rows.map((event, index) => {
    const { tenant, actor, correlationId } = event.metadata;
    const envelopeId = JSON.stringify([tenant, actor, correlationId]);
    let envelope = envelopeNumbers.get(envelopeId);
    if (envelope === undefined) {
      envelope = envelopes.length;
      envelopeNumbers.set(envelopeId, envelope);
      envelopes.push({ n: envelope, tenant, actor, correlation_id: correlationId });
    }
    const { recordedAt, schemaVersion, causationId, prevHash, hash } = event.metadata;
    // Written as text, not through an object and JSON.stringify (this runs for every event). Only
    // the type and causation id can hold characters to escape: the id was checked as a UUID before
    // queueing, the time is `toISOString`'s, the hashes are hex, the rest are integers. The data
    // goes in as the text already made of it: the same text `recent` is given.
    return (
      `{"ordinal":${planned.ordinals.get(event)},"stream":${streamNumbers.get(event.streamId)},"envelope":${envelope},` +
      `"revision":${event.revision},"event_id":"${event.id}","type":${JSON.stringify(event.type)},` +
      `"recorded_at":"${recordedAt}","schema_version":${schemaVersion},"causation_id":${JSON.stringify(causationId)},` +
      `"prev_hash":"${prevHash}","hash":"${hash}","data":${planned.dataJson[index]}}`
    );
  });
  return {
    name: 'event-log-append',
    text: 'SELECT event_log_append($1::jsonb, $2::jsonb, $3::jsonb, $4, $5)::text AS head',
    values: [
      `[${events.join(',')}]`,
      JSON.stringify(streams),
      JSON.stringify(envelopes),
      APPEND_LOCK_KEY,
      EVENT_LOG_CHANNEL,
    ],
  };
}
