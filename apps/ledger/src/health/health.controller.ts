import { Controller, Get, Res, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheck, HealthCheckService, type HealthCheckResult } from '@nestjs/terminus';
import { HEALTH_ANSWER_MS } from '#event-log';
import type { FastifyReply } from 'fastify';
import { DatabaseHealthIndicator } from './database.health.js';
import { EventLogHealthIndicator } from './event-log.health.js';

@Controller('health')
export class HealthController {
  /** The latest check, shared by the probes arriving until `HEALTH_ANSWER_MS` after it started: a flood costs one. */
  private latest: Promise<HealthCheckResult> | undefined;

  constructor(
    private readonly health: HealthCheckService,
    private readonly database: DatabaseHealthIndicator,
    private readonly eventLog: EventLogHealthIndicator,
  ) {}

  /** Down is answered 503 with the same report as up, which part is down included (not the API's error body). */
  @Get()
  @HealthCheck()
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    if (!this.latest) {
      const check = this.health.check([() => this.database.check('database'), () => this.eventLog.check('eventLog')]);
      this.latest = check;
      const expire = () => {
        if (this.latest === check) this.latest = undefined;
      };
      // Kept until it has both been shared for its time and settled, whichever comes later. Unref'd: a probe just
      // before shutdown must not hold the process.
      setTimeout(() => void check.catch(() => undefined).then(expire), HEALTH_ANSWER_MS).unref();
    }
    try {
      return await this.latest;
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      void reply.status(503);
      return error.getResponse();
    }
  }
}
