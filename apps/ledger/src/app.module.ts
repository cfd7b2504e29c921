import { Module, type DynamicModule } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { TypeOrmModule } from '@nestjs/typeorm';
import { databaseConnection } from '#event-log';
import { LoggerModule } from 'nestjs-pino';
import { LEDGER_CONFIG, type LedgerConfig } from './config/ledger-config.js';
import { AdminModule } from './admin/admin.module.js';
import { DatabaseModule } from './database/database.module.js';
import { EventLogModule } from './event-log/event-log.module.js';
import { HealthModule } from './health/health.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { READ_MODEL_ENTITIES } from './sessions/read-models/read-model.entities.js';
import { SessionsModule } from './sessions/sessions.module.js';
import { LiveModule } from './live/live.module.js';
import { GovernanceModule } from './governance/governance.module.js';
import { IdentityModule } from './identity/identity.module.js';
import { GatewayModule } from './gateway/gateway.module.js';
import { VerifiableLogModule } from './verifiable-log/verifiable-log.module.js';
import { ConsoleModule } from './console/console.module.js';

export interface AppOptions {
  readonly config: LedgerConfig;
  /** The PostgreSQL the service uses: `DATABASE_URL`, or the embedded server it started. Already migrated. */
  readonly connectionString: string;
}

@Module({})
export class AppModule {
  static forRoot({ config, connectionString }: AppOptions): DynamicModule {
    return {
      module: AppModule,
      global: true,
      imports: [
        LoggerModule.forRoot({
          // Credentials never reach the log, should anything log a request's headers.
          pinoHttp: {
            level: config.logLevel,
            // An error may hold the request it made (an SDK's `config` or `request`), headers and all.
            redact: [
              'req.headers.authorization',
              'req.headers["x-api-key"]',
              'req.headers.cookie',
              'err.*.headers.authorization',
              'err.*.headers["x-api-key"]',
              'err.*.headers.cookie',
            ],
          },
          // No request-scoped logger (decision 0040): binding one runs each request in an
          // AsyncLocalStorage, whose promise hooks then tax every await in the process.
          forRoutes: [],
        }),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: connectionString,
          // Bounded as every pool is; its failures then say whether the database is why (`databaseFailure`).
          extra: databaseConnection(connectionString, config.databaseBounds),
          synchronize: false,
          migrationsRun: false,
          entities: READ_MODEL_ENTITIES,
        }),
        DatabaseModule.forRoot(connectionString, config.databaseBounds),
        MetricsModule,
        EventLogModule.forRoot({
          postgresUrl: connectionString,
          databaseBounds: config.databaseBounds,
          eventStoreConnectionString: config.eventStoreConnectionString,
        }),
        HealthModule,
        CqrsModule.forRoot(),
        IdentityModule,
        SessionsModule,
        AdminModule,
        LiveModule,
        GovernanceModule,
        GatewayModule,
        VerifiableLogModule,
        ConsoleModule,
      ],
      providers: [{ provide: LEDGER_CONFIG, useValue: config }],
      exports: [LEDGER_CONFIG],
    };
  }
}
