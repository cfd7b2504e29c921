import { Inject, Module, type OnApplicationBootstrap } from '@nestjs/common';
import type pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';
import { dropLeftoverScratchSchemas } from '../projections/rebuild.js';
import { AdminController } from './admin.controller.js';

@Module({ controllers: [AdminController] })
export class AdminModule implements OnApplicationBootstrap {
  constructor(@Inject(PG_POOL) private readonly pool: pg.Pool) {}

  /** A rebuild killed midway (crash, kill -9) leaves its scratch schema; the next start drops it. */
  async onApplicationBootstrap(): Promise<void> {
    await dropLeftoverScratchSchemas(this.pool);
  }
}
