export * from './event-log.js';
export * from './errors.js';
export * from './append-plan.js';
export { readStreamAfterPosition } from './stream-page.js';
export { createPostgresEventLog, type PostgresEventLogOptions } from './postgres/postgres-event-log.js';
export type { CommitStats } from './postgres/group-commit-writer.js';
export { EventLog1763800000001 } from './postgres/1763800000001-event-log.migration.js';
export { createEventStoreDbEventLog, type EventStoreDbEventLogOptions } from './eventstoredb/eventstoredb-event-log.js';
export { BatchingQueue } from './batching-queue.js';
