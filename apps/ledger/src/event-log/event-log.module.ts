import { Global, Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { createPostgresEventLog, type DatabaseBounds, type EventLog } from '#event-log';
import { Logger } from 'nestjs-pino';
import { MetricsModule } from '../metrics/metrics.module.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { withSharedLogFeed } from './shared-log-feed.js';
import { EVENT_LOG } from './event-log-token.js';
import { eventStoreDb } from './event-store-db.js';

/** Binds the event-log port to its adapter at the edge; everything else injects `EVENT_LOG`. */
@Global()
@Module({})
export class EventLogModule implements OnApplicationShutdown {
  constructor(@Inject(EVENT_LOG) private readonly eventLog: EventLog) {}

  /** EventStoreDB when its connection string is set, else the PostgreSQL event log in `postgresUrl`. */
  static forRoot({
    postgresUrl,
    databaseBounds,
    eventStoreConnectionString,
  }: {
    postgresUrl: string;
    databaseBounds: DatabaseBounds;
    eventStoreConnectionString?: string;
  }): DynamicModule {
    return {
      module: EventLogModule,
      imports: [MetricsModule],
      providers: [
        {
          provide: EVENT_LOG,
          inject: [LedgerMetrics, Logger],
          useFactory: async (metrics: LedgerMetrics, logger: Logger) => {
            const onError = (error: Error) => logger.warn({ err: error }, 'event log connection problem');
            const eventLog = eventStoreConnectionString
              ? (await eventStoreDb()).createEventStoreDbEventLog({
                  connectionString: eventStoreConnectionString,
                  answerTimeoutMs: databaseBounds.statementTimeoutMs,
                  onError,
                })
              : await createPostgresEventLog({
                  connectionString: postgresUrl,
                  ...databaseBounds,
                  onCommit: (stats) => metrics.recordCommit(stats),
                  onError,
                });
            // The service's consumers (projections, saga, Merkle log, live feeds) share one read of the log's tail.
            return withSharedLogFeed(eventLog, (error) =>
              logger.warn({ err: error }, 'shared log read failed; resuming from its position'),
            );
          },
        },
      ],
      exports: [EVENT_LOG],
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.eventLog.close();
  }
}
