import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { databaseFailure, HEALTH_ANSWER_MS, heardPool, healthPoolOptions, healthQuery } from '#event-log';
import pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';

/** Pings PostgreSQL on a connection of its own: a ping queued behind requests on the service's pools is not an answer. */
@Injectable()
export class DatabaseHealthIndicator implements OnApplicationShutdown {
  private readonly logger = new Logger('DatabaseHealth');
  private readonly pool: pg.Pool;

  constructor(
    @Inject(PG_POOL) shared: pg.Pool,
    private readonly health: HealthIndicatorService,
  ) {
    this.pool = heardPool(healthPoolOptions(shared.options), (error) =>
      this.logger.warn({ err: error }, 'the health check lost its connection'),
    );
  }

  async check(key: string) {
    const indicator = this.health.check(key);
    try {
      await healthQuery(this.pool, 'SELECT 1');
      return indicator.up();
    } catch (error) {
      // The route is public: what failed, never the driver's words (they name the database's address).
      this.logger.warn({ err: error }, 'the database failed its health check');
      return indicator.down({
        message: databaseFailure(error) ? 'cannot be reached' : `no answer within ${HEALTH_ANSWER_MS} ms`,
      });
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}
