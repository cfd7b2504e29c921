import { Controller, Get, Res, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import type { FastifyReply } from 'fastify';
import { DatabaseHealthIndicator } from './database.health.js';
import { EventLogHealthIndicator } from './event-log.health.js';

@Controller('health')
export class HealthController {
  /** The check under way: probes arriving meanwhile share it, so a flood of them costs the database one. */
  private running: Promise<HealthCheckResult> | undefined;

  constructor(
    private readonly health: HealthCheckService,
    private readonly database: DatabaseHealthIndicator,
    private readonly eventLog: EventLogHealthIndicator,
  ) {}

  /** Down is answered 503 with the same report as up, which part is down included (not the API's error body). */
  @Get()
  @HealthCheck()
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    this.running ??= this.health
      .check([() => this.database.check('database'), () => this.eventLog.check('eventLog')])
      .finally(() => (this.running = undefined));
    try {
      return await this.running;
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      void reply.status(503);
      return error.getResponse();
    }
  }
}
