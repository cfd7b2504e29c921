import { Global, Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { Logger } from 'nestjs-pino';
import { databaseConnection, heardPool, type DatabaseBounds } from '#event-log';
import pg from 'pg';
import { PG_POOL } from './pg-pool-token.js';

/** A plain pg pool for the parts that write in batches themselves (projections); TypeORM serves the queries. */
@Global()
@Module({})
export class DatabaseModule implements OnApplicationShutdown {
  constructor(@Inject(PG_POOL) private readonly pool: pg.Pool) {}

  static forRoot(connectionString: string, bounds: DatabaseBounds): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        {
          provide: PG_POOL,
          inject: [Logger],
          useFactory: (logger: Logger) => {
            const dropped = (error: Error) => logger.warn({ err: error }, 'a database connection failed');
            return heardPool({ ...databaseConnection(connectionString, bounds), max: 6 }, dropped);
          },
        },
      ],
      exports: [PG_POOL],
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}
