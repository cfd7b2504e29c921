import { Controller, HttpCode, Inject, Post, Query } from '@nestjs/common';
import type { EventLog } from '#event-log';
import type pg from 'pg';
import { z } from 'zod';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { READ_MODEL_NAMES, rebuildReadModels } from '../projections/read-model-projections.js';

export const rebuildQuery = z
  .object({ projection: z.enum(READ_MODEL_NAMES as [string, ...string[]]).optional() })
  .strict();

@Controller('v1/admin')
export class AdminController {
  constructor(
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  /**
   * Rebuilds the read models (`?projection=` one of them) from the log into fresh tables and
   * swaps them in; reads keep working meanwhile. The totals cover every projection rebuilt.
   * Rebuilds run one at a time across instances: a request made during another rebuild waits
   * for it, then rebuilds (decision 0012). It acts on every tenant: the operator's alone (OPERATOR_ROUTES).
   */
  @Post('rebuild')
  @HttpCode(200)
  async rebuild(@Query() query: unknown) {
    const { projection } = rebuildQuery.parse(query);
    const rebuilt = await rebuildReadModels(this.pool, this.eventLog, projection ? [projection] : undefined);
    const summary = ({ events, position, durationMs }: { events: number; position: bigint; durationMs: number }) => ({
      events,
      position: Number(position),
      durationMs: Math.round(durationMs),
    });
    return {
      ...summary({
        events: rebuilt.reduce((sum, { result }) => sum + result.events, 0),
        position: rebuilt.reduce((highest, { result }) => (result.position > highest ? result.position : highest), 0n),
        durationMs: rebuilt.reduce((sum, { result }) => sum + result.durationMs, 0),
      }),
      projections: Object.fromEntries(rebuilt.map(({ name, result }) => [name, summary(result)])),
    };
  }
}
