import { Inject, Module, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import type { EventLog } from '#event-log';
import { Logger } from 'nestjs-pino';
import type pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ProjectionRunner, within } from '../projections/projection-runner.js';
import { LogController } from './log.controller.js';
import { loadLogSigningKey } from './log-signing-key.js';
import { merkleLogConsumer } from './merkle-log.consumer.js';
import { InstanceLock } from './instance-lock.js';
import { LogForkError } from './log-fork-error.js';
import { SigningBusyError, VerifiableLog } from './verifiable-log.js';
import { VerifyController } from './verify.controller.js';
import { SessionExporter } from './session-export.js';
import { SignedCheckpointMemory } from './signed-checkpoint-memory.js';
import { StreamVerifier } from './stream-verifier.js';

export const MERKLE_RUNNER = Symbol('MERKLE_RUNNER');
/** The Merkle log takes the log in batches at most this often: verify waits for it, nothing else does. */
const MERKLE_BATCH_INTERVAL_MS = 25;
/** How long start-up waits for its first signing. */
const START_WAIT_MS = 2_000;

/**
 * The verifiable log: the Merkle consumer, the checkpoint signer (at least every
 * `LEDGER_CHECKPOINT_INTERVAL_MS` while the log grows), the /v1/log routes and the verify routes.
 */
@Module({
  controllers: [LogController, VerifyController],
  providers: [
    StreamVerifier,
    SessionExporter,
    {
      provide: MERKLE_RUNNER,
      inject: [PG_POOL, EVENT_LOG, Logger],
      useFactory: (pool: pg.Pool, eventLog: EventLog, logger: Logger) =>
        new ProjectionRunner(pool, eventLog, merkleLogConsumer(), {
          batchIntervalMs: MERKLE_BATCH_INTERVAL_MS,
          onError: (error) => logger.warn({ err: error }, 'Merkle log consumer failed; restarting from its checkpoint'),
        }),
    },
    {
      provide: VerifiableLog,
      inject: [PG_POOL, EVENT_LOG, LEDGER_CONFIG, MERKLE_RUNNER],
      useFactory: async (pool: pg.Pool, eventLog: EventLog, config: LedgerConfig, runner: ProjectionRunner) => {
        const key = await loadLogSigningKey(config.verifiableLog, config.dataDir);
        return new VerifiableLog(pool, eventLog, key, runner, new SignedCheckpointMemory(config.dataDir, key));
      },
    },
  ],
  exports: [VerifiableLog],
})
export class VerifiableLogModule implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;
  private signing: Promise<void> | undefined;
  private readonly instanceLock: InstanceLock;

  constructor(
    @Inject(MERKLE_RUNNER) private readonly runner: ProjectionRunner,
    @Inject(VerifiableLog) private readonly log: VerifiableLog,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
    @Inject(Logger) private readonly logger: Logger,
    @Inject(PG_POOL) pool: pg.Pool,
  ) {
    this.instanceLock = new InstanceLock(pool.options.connectionString, {
      lost: (error) => this.logger.warn({ err: error }, 'the instance lock was lost; taking it again'),
      waiting: () => this.logger.warn('a repair (cli.js log-repair) holds the instance lock; waiting for it'),
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    // Before the consumer starts: a repair (`cli.js log-repair`) runs only while no instance does.
    await this.instanceLock.take();
    // A checkpoint exists from the first start on (of the empty tree, on a new log). A signing that checks much
    // of the log first (a new key, an instance back after long) goes on beside the service, which does not wait
    // for it past START_WAIT_MS: recording must not.
    await within(this.signInTurn(), START_WAIT_MS);
    this.runner.start();
    this.timer = setInterval(() => void this.signInTurn(), this.config.verifiableLog.checkpointIntervalMs);
  }

  /** One signing at a time: a slow one is not overtaken by the next tick. */
  private signInTurn(): Promise<void> {
    return (this.signing ??= this.signLatest().finally(() => (this.signing = undefined)));
  }

  private async signLatest(): Promise<void> {
    try {
      await this.log.signLatest();
    } catch (error) {
      if (error instanceof LogForkError)
        this.logger.error(
          { err: error },
          'refusing to sign a checkpoint: the stored tree contradicts the log or a signed one',
        );
      else if (error instanceof SigningBusyError)
        this.logger.log('another signer holds the signing lock; signing at the next interval');
      else this.logger.warn({ err: error }, 'signing a checkpoint failed; retrying at the next interval');
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.signing;
    await this.runner.stop();
    await this.instanceLock.release();
  }
}
