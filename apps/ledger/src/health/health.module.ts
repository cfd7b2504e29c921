import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { EventLogHealthIndicator } from './event-log.health.js';
import { HealthController } from './health.controller.js';

@Module({ imports: [TerminusModule], controllers: [HealthController], providers: [EventLogHealthIndicator] })
export class HealthModule {}
