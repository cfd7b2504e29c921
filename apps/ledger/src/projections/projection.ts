import type { EventFilter, EventLogReader, ProjectionEvent, RecordedEvent } from '#event-log';
import type { PoolClient } from 'pg';

/** Where a projection's batch runs: the transaction that also moves its checkpoint, and the log to read history from. */
export interface ProjectionContext {
  readonly client: PoolClient;
  readonly eventLog: EventLogReader;
}

/**
 * What a projection is, apart from how it runs: the same definition serves the live runner and
 * rebuilds. `handle` folds a batch and writes each changed row once, idempotently (rows carry
 * the position they reflect). `reset` forgets in-memory state after a failed batch. `Event` is
 * what it reads of each event: a read model folds a `ProjectionEvent`, so its rebuild reads no more.
 */
export interface ProjectionDefinition<Event extends ProjectionEvent = RecordedEvent> {
  readonly name: string;
  readonly version: number;
  readonly filter: EventFilter;
  // Function-typed members, not methods: TypeScript then checks `Event` strictly, so a projection
  // that reads more of an event cannot be passed where a `ProjectionEvent` is all it gets (a rebuild).
  readonly handle: (events: readonly Event[], context: ProjectionContext) => Promise<void>;
  /**
   * Whether `handle` writes anything for this event (every event it is given, by default). A batch
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
