export * from './event-log.js';
export * from './errors.js';
export * from './append-plan.js';
export { readStreamAfterPosition } from './stream-page.js';
export {
  createPostgresEventLog,
  databaseConnection,
  DEFAULT_CONNECT_TIMEOUT_MS,
  type DatabaseBounds,
  type PostgresEventLogOptions,
} from './postgres/postgres-event-log.js';
export type { CommitStats } from './postgres/group-commit-writer.js';
export { EventLog1763800000001 } from './postgres/1763800000001-event-log.migration.js';
export { AppendFunction1763800000150 } from './postgres/1763800000150-append-function.migration.js';
export { CompactEventLog1763800000250 } from './postgres/1763800000250-compact-event-log.migration.js';
export { AppendLookupsByKey1763800000340 } from './postgres/1763800000340-append-lookups-by-key.migration.js';
export { BatchingQueue } from './batching-queue.js';
export {
  DatabaseClient,
  databaseFailure,
  TimeoutShare,
  type DatabaseConnection,
  type DatabaseFailure,
} from './postgres/database-failure.js';
export { heardPool } from './postgres/heard-pool.js';
export { HEALTH_ANSWER_MS, healthPoolOptions, healthQuery } from './postgres/health-query.js';
export { partitionPoint } from './partition-point.js';
export { withTimeout } from './with-timeout.js';
export { eventStoreAddress, eventStoreConnectionStringProblem } from './eventstoredb/connection-string-options.js';
