import { Controller, Get, Header } from '@nestjs/common';
import { CurrentPrincipal } from '../identity/current-principal.js';
import { requireOperator } from '../identity/operator.js';
import type { Principal } from '../identity/principal.js';
import { LedgerMetrics } from './ledger-metrics.js';

@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: LedgerMetrics) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(@CurrentPrincipal() principal: Principal): Promise<string> {
    requireOperator(principal);
    return this.metrics.registry.metrics();
  }
}
