import { Inject, Module, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { CommandBus, CqrsModule, EventBus } from '@nestjs/cqrs';
import type { EventLog } from '#event-log';
import { Logger } from 'nestjs-pino';
import type pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { StartupError } from '../database/embedded-postgres.js';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ProjectionRunner } from '../projections/projection-runner.js';
import { DecideToolCallHandler } from './decide-tool-call.handler.js';
import { GOVERNANCE, governanceParts, type GovernanceParts } from './governance-parts.js';
import { AdvanceToolCallHandler, GovernanceSaga } from './governance-saga.js';
import { governanceSagaConsumer } from './governance-saga.consumer.js';
import { TOOL_CALLS_RUNNER, toolCallsProjection } from './read-models/tool-calls.projection.js';
import { ToolCallProcessor } from './tool-call-processor.js';
import { ToolCallRepository } from './toolcall-repository.js';
import { ToolCallsController } from './tool-calls.controller.js';

const GOVERNANCE_SAGA_RUNNER = Symbol('GOVERNANCE_SAGA_RUNNER');

/**
 * Tool-call governance: the approval routes, the `tool_calls` read model, and — when MCP
 * servers are configured — the saga (a checkpointed log consumer feeding the `@nestjs/cqrs`
 * saga, which sends each call through the processor).
 */
@Module({
  imports: [CqrsModule],
  controllers: [ToolCallsController],
  providers: [
    ToolCallRepository,
    ToolCallProcessor,
    GovernanceSaga,
    AdvanceToolCallHandler,
    DecideToolCallHandler,
    {
      provide: GOVERNANCE,
      inject: [LEDGER_CONFIG],
      useFactory: (config: LedgerConfig) => governanceParts(config.governance),
    },
    {
      provide: TOOL_CALLS_RUNNER,
      inject: [PG_POOL, EVENT_LOG, Logger],
      useFactory: (pool: pg.Pool, eventLog: EventLog, logger: Logger) =>
        new ProjectionRunner(pool, eventLog, toolCallsProjection(), {
          onError: (error) =>
            logger.warn({ err: error }, 'tool-calls projection failed; restarting from its checkpoint'),
        }),
    },
    {
      provide: GOVERNANCE_SAGA_RUNNER,
      inject: [PG_POOL, EVENT_LOG, Logger, GOVERNANCE, EventBus, CommandBus],
      useFactory: (
        pool: pg.Pool,
        eventLog: EventLog,
        logger: Logger,
        parts: GovernanceParts,
        eventBus: EventBus,
        commandBus: CommandBus,
      ) =>
        new ProjectionRunner(pool, eventLog, governanceSagaConsumer(parts, eventBus, commandBus, pool), {
          onError: (error) =>
            logger.warn({ err: error }, 'governance saga consumer failed; restarting from its checkpoint'),
        }),
    },
  ],
})
export class GovernanceModule implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    @Inject(TOOL_CALLS_RUNNER) private readonly toolCallsRunner: ProjectionRunner,
    @Inject(GOVERNANCE_SAGA_RUNNER) private readonly sagaRunner: ProjectionRunner,
    @Inject(GOVERNANCE) private readonly parts: GovernanceParts,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Refused before anything starts.
    await this.parts.executor?.loaded().catch((error: Error) => {
      throw new StartupError(`LEDGER_MCP_SERVERS: the MCP client could not be loaded (${error.message})`);
    });
    this.toolCallsRunner.start();
    if (!this.parts.executor) return;
    // Governance applies from when it was first enabled: tool calls already in the log are history, not requests.
    // Awaited before the service listens, so no chunk posted after startup can fall before the checkpoint.
    await this.sagaRunner.createCheckpointAt(await this.eventLog.headPosition());
    this.sagaRunner.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([this.toolCallsRunner.stop(), this.sagaRunner.stop()]);
  }
}
