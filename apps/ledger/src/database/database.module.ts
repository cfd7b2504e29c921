import { Global, Inject, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { Logger } from 'nestjs-pino';
import pg from 'pg';

export const PG_POOL = Symbol('PG_POOL');

/** A plain pg pool for the parts that write in batches themselves (projections); TypeORM serves the queries. */
@Global()
@Module({})
export class DatabaseModule implements OnApplicationShutdown {
  constructor(@Inject(PG_POOL) private readonly pool: pg.Pool) {}

  static forRoot(connectionString: string): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        {
          provide: PG_POOL,
          inject: [Logger],
          useFactory: (logger: Logger) => {
            const pool = new pg.Pool({ connectionString, max: 6 });
            // An idle client's connection can drop (a restart of PostgreSQL); without a listener that would crash the process.
            pool.on('error', (error) => logger.warn({ err: error }, 'idle database connection failed'));
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
