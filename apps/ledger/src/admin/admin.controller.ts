import { Controller, HttpCode, Inject, Post } from '@nestjs/common';
import type { EventLog } from '#event-log';
import type pg from 'pg';
import { PG_POOL } from '../database/database.module.js';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { rebuildProjection } from '../projections/rebuild.js';
import { blockReadModelsProjection } from '../sessions/read-models/block-read-models.projection.js';
import { BLOCK_READ_MODEL_TABLES } from '../sessions/read-models/block-read-model-tables.js';

@Controller('v1/admin')
export class AdminController {
  constructor(
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(EVENT_LOG) private readonly eventLog: EventLog,
  ) {}

  /** Rebuilds the read models from the log into fresh tables and swaps them in; reads keep working meanwhile. */
  @Post('rebuild')
  @HttpCode(200)
  async rebuild() {
    const result = await rebuildProjection(this.pool, this.eventLog, blockReadModelsProjection(), BLOCK_READ_MODEL_TABLES);
    return { events: result.events, position: Number(result.position), durationMs: Math.round(result.durationMs) };
  }
}
