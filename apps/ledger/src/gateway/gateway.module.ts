import { Inject, Module, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Logger } from 'nestjs-pino';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { SessionsModule } from '../sessions/sessions.module.js';
import { GatewayController } from './gateway.controller.js';
import { ModelCallProxy } from './model-call-proxy.js';
import { UpstreamCaller } from './upstream-caller.js';
import { UpstreamPools } from './upstream-pools.js';

const clock = { now: () => Date.now() };

/** The recording gateway; `SIGHUP` re-reads `LEDGER_UPSTREAMS` (a key disabled by a 401 gets another chance). */
@Module({
  imports: [SessionsModule],
  controllers: [GatewayController],
  providers: [
    {
      provide: UpstreamPools,
      inject: [LEDGER_CONFIG, LedgerMetrics],
      useFactory: ({ gateway }: LedgerConfig, metrics: LedgerMetrics) => {
        const options = { clock, observer: metrics };
        const pools = gateway.upstreamsFile
          ? UpstreamPools.fromFile(gateway.upstreamsFile, process.env, options)
          : new UpstreamPools(() => [], options);
        metrics.watchUpstreamKeys(() => pools.availableKeys());
        return pools;
      },
    },
    {
      provide: UpstreamCaller,
      inject: [UpstreamPools, LEDGER_CONFIG, LedgerMetrics],
      useFactory: (pools: UpstreamPools, { gateway }: LedgerConfig, metrics: LedgerMetrics) =>
        new UpstreamCaller(pools, { timeoutMs: gateway.upstreamTimeoutMs, observer: metrics }),
    },
    ModelCallProxy,
  ],
})
export class GatewayModule implements OnModuleInit, OnApplicationShutdown {
  private readonly reload = () => {
    try {
      this.pools.reload();
      this.logger.log('LEDGER_UPSTREAMS reloaded');
    } catch (error) {
      this.logger.error({ err: error }, 'LEDGER_UPSTREAMS could not be reloaded; the configuration in force stays');
    }
  };

  constructor(
    private readonly pools: UpstreamPools,
    private readonly caller: UpstreamCaller,
    @Inject(Logger) private readonly logger: Logger,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
  ) {}

  onModuleInit(): void {
    if (this.config.gateway.upstreamsFile) process.on('SIGHUP', this.reload);
  }

  onApplicationShutdown(): void {
    process.off('SIGHUP', this.reload);
    this.caller.close();
  }
}
