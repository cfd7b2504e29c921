import { Inject, Injectable, Logger } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { HEALTH_ANSWER_MS, type EventLog } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { within } from '../projections/projection-runner.js';

/** A writer holding the append lock longer than this stalls every subscriber: report the log as down. */
const STALL_LIMIT_MS = 30_000;

@Injectable()
export class EventLogHealthIndicator {
  private readonly logger = new Logger('EventLogHealth');

  constructor(
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
    private readonly health: HealthIndicatorService,
  ) {}

  async check(key: string) {
    const indicator = this.health.check(key);
    try {
      // Public: whether the log takes writes, never how much any tenant wrote (no head position, no queue lengths).
      const health = await within(this.eventLog.health(), HEALTH_ANSWER_MS);
      if (!health) return indicator.down({ message: `the event log did not answer within ${HEALTH_ANSWER_MS} ms` });
      const { engine, appendLockHeldMs } = health;
      const details = { engine, appendLockHeldMs };
      if (health.takesWrites === false) return indicator.down({ ...details, message: 'the database takes no writes' });
      return (appendLockHeldMs ?? 0) > STALL_LIMIT_MS
        ? indicator.down({
            ...details,
            message: `a writer has held the append lock for ${Math.round(appendLockHeldMs!)} ms; subscribers are stalled behind it`,
          })
        : indicator.up(details);
    } catch (error) {
      // The route is public: that it failed, never the driver's words (they name the server's address).
      this.logger.warn({ err: error }, 'the event log failed its health check');
      return indicator.down({ message: 'the event log failed its check' });
    }
  }
}
