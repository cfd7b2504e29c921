import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import pg from 'pg';
import { databaseFailure } from '../database/database-unavailable.js';
import { PG_POOL } from '../database/pg-pool-token.js';
import { within } from '../projections/projection-runner.js';
import { HEALTH_ANSWER_MS } from './health-answer.js';

/** Pings PostgreSQL on a connection of its own: a ping queued behind requests on the service's pools is not an answer. */
@Injectable()
export class DatabaseHealthIndicator implements OnApplicationShutdown {
  private readonly logger = new Logger('DatabaseHealth');
  private readonly pool: pg.Pool;

  constructor(
    @Inject(PG_POOL) shared: pg.Pool,
    private readonly health: HealthIndicatorService,
  ) {
    this.pool = new pg.Pool({ ...shared.options, max: 1 });
    this.pool.on('error', (error) => this.logger.warn({ err: error }, 'the health check lost its connection'));
  }

  async check(key: string) {
    const indicator = this.health.check(key);
    try {
      const answered = await within(this.pool.query('SELECT 1'), HEALTH_ANSWER_MS);
      return answered ? indicator.up() : indicator.down({ message: `no answer within ${HEALTH_ANSWER_MS} ms` });
    } catch (error) {
      // The route is public: what failed, never the driver's words (they name the database's address).
      this.logger.warn({ err: error }, 'the database failed its health check');
      return indicator.down({ message: databaseFailure(error) ? 'cannot be reached' : 'the ping failed' });
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}
