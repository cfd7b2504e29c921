import type { EventFilter, EventLogReader, ProjectionEvent, RecordedEvent } from '#event-log';
import type { PoolClient } from 'pg';

/**
 * Where a projection's batch runs: the connection that holds its lead (in the transaction that also moves its
 * checkpoint, for `handle`; before the batch's statement, for `writes`), and the log to read history from.
 */
export interface ProjectionContext {
  readonly client: PoolClient;
  readonly eventLog: EventLogReader;
}

/**
 * A batch's writes as one statement (an INSERT, UPDATE or DELETE, or a WITH of them), prepared under
 * `name` on each connection (decision 0038). The runner moves the checkpoint inside it (decision 0052).
 */
export interface BatchStatement {
  readonly name: string;
  readonly text: string;
  readonly values: readonly unknown[];
}

interface ProjectionBase<Event extends ProjectionEvent> {
  readonly name: string;
  readonly version: number;
  readonly filter: EventFilter;
  /**
   * Whether the projection writes anything for this event (every event it is given, by default). A batch
   * with no such event is not handled and commits nothing; its checkpoint is stored later.
   */
  readonly writesFor?: (event: Event) => boolean;
  /**
   * Work on a batch that need not wait for its transaction (the governance saga's next steps): called
   * with each batch before `handle`, and again for the same events if that transaction fails.
   */
  readonly react?: (events: readonly Event[]) => void;
  reset(): void;
  /** A consumer with work in flight outside its transaction (the governance saga) picks it up again here, when its runner takes the lead. */
  resume?(): Promise<void>;
}

// Function-typed members, not methods: TypeScript then checks `Event` strictly, so a projection that
// reads more of an event cannot be passed where a `ProjectionEvent` is all it gets (a rebuild).

/** Writes through the context's client, in the transaction that moves its checkpoint: several statements, reads, checks. */
interface HandledProjection<Event extends ProjectionEvent> extends ProjectionBase<Event> {
  readonly handle: (events: readonly Event[], context: ProjectionContext) => Promise<void>;
  readonly writes?: undefined;
}

/**
 * Gives a batch's writes as one statement, or none when nothing changed: the runner runs it with the
 * checkpoint's move as one statement, a round trip per batch where a transaction takes four. The context's
 * client is only for reads: outside any transaction, whatever it wrote would commit apart from the batch.
 */
interface StatementProjection<Event extends ProjectionEvent> extends ProjectionBase<Event> {
  readonly writes: (events: readonly Event[], context: ProjectionContext) => Promise<BatchStatement | undefined>;
  readonly handle?: undefined;
}

/**
 * What a projection is, apart from how it runs: the same definition serves the live runner and
 * rebuilds. It folds a batch and writes each changed row once, idempotently (rows carry the
 * position they reflect). `reset` forgets in-memory state after a failed batch. `Event` is what it
 * reads of each event: a read model folds a `ProjectionEvent`, so its rebuild reads no more.
 */
export type ProjectionDefinition<Event extends ProjectionEvent = RecordedEvent> =
  HandledProjection<Event> | StatementProjection<Event>;

/** Folds a batch and writes it on the context's client, in the caller's transaction (a rebuild's), whichever form the projection has. */
export async function handleBatch<Event extends ProjectionEvent>(
  definition: ProjectionDefinition<Event>,
  events: readonly Event[],
  context: ProjectionContext,
): Promise<void> {
  if (!definition.writes) return definition.handle(events, context);
  const statement = await definition.writes(events, context);
  if (statement) await context.client.query({ ...statement, values: [...statement.values] });
}
