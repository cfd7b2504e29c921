import { Inject, Module, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import type { EventLog } from '#event-log';
import { Logger } from 'nestjs-pino';
import type pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ProjectionRunner } from '../projections/projection-runner.js';
import { blockReadModelsProjection } from './read-models/block-read-models.projection.js';
import { ForkSessionHandler, SessionCommandHandler } from './session-command.handler.js';
import { SessionList } from './session-list.js';
import { BLOCK_PROJECTION_RUNNER, SessionQueries } from './session-queries.js';
import { SESSION_QUOTA, SessionRepository } from './session-repository.js';
import { SessionsController } from './sessions.controller.js';
import { CredentialWrites } from './credential-writes.js';

@Module({
  imports: [CqrsModule],
  controllers: [SessionsController],
  providers: [
    { provide: SESSION_QUOTA, inject: [LEDGER_CONFIG], useFactory: (config: LedgerConfig) => config.sessionQuota },
    SessionRepository,
    SessionCommandHandler,
    ForkSessionHandler,
    SessionQueries,
    CredentialWrites,
    SessionList,
    {
      provide: BLOCK_PROJECTION_RUNNER,
      inject: [PG_POOL, EVENT_LOG, Logger],
      useFactory: (pool: pg.Pool, eventLog: EventLog, logger: Logger) =>
        new ProjectionRunner(pool, eventLog, blockReadModelsProjection(), {
          onError: (error) =>
            logger.warn({ err: error }, 'block read-model projection failed; restarting from its checkpoint'),
        }),
    },
  ],
  exports: [SessionRepository, BLOCK_PROJECTION_RUNNER],
})
export class SessionsModule implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(@Inject(BLOCK_PROJECTION_RUNNER) private readonly runner: ProjectionRunner) {}

  onApplicationBootstrap(): void {
    this.runner.start();
  }

  /** Before the pools close (onApplicationShutdown): the runner holds a connection until it stops. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.runner.stop();
  }
}
