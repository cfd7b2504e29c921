import { Global, Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { Logger } from 'nestjs-pino';
import { databaseConnection, type DatabaseBounds } from '#event-log';
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
            const pool = new pg.Pool({
              ...databaseConnection(connectionString, bounds),
              max: 6,
            });
            // A connection can drop (a restart of PostgreSQL), idle in the pool or checked out between two
            // queries; without a listener that would crash the process. The next query on it fails instead.
            const dropped = (error: Error) => logger.warn({ err: error }, 'a database connection failed');
            pool.on('error', dropped);
            pool.on('connect', (client) => client.on('error', dropped));
            return pool;
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
