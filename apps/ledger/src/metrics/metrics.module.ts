import { Global, Module } from '@nestjs/common';
import { LedgerMetrics } from './ledger-metrics.js';
import { MetricsController } from './metrics.controller.js';

@Global()
@Module({ providers: [LedgerMetrics], controllers: [MetricsController], exports: [LedgerMetrics] })
export class MetricsModule {}
