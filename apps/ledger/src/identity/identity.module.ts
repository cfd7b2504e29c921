import { Inject, Module, type OnApplicationBootstrap } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { Logger } from 'nestjs-pino';
import type pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { PG_POOL } from '../database/database.module.js';
import { ApiKeyStore } from './api-key-store.js';
import { AuthGuard } from './auth.guard.js';
import { Authenticator } from './authenticator.js';
import { bootstrapAdminKey } from './bootstrap-admin-key.js';
import { CredentialRateLimitGuard } from './credential-rate-limit.guard.js';
import { KeysController } from './keys.controller.js';

/** Credentials, the guard every request passes, per-credential limits, and the first admin key. */
@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      inject: [LEDGER_CONFIG],
      useFactory: (config: LedgerConfig) => [{ name: 'credential', ttl: config.identity.rateLimit.windowMs, limit: config.identity.rateLimit.limit }],
    }),
  ],
  controllers: [KeysController],
  providers: [
    ApiKeyStore,
    Authenticator,
    // Guards run in this order: who is it, then how often.
    { provide: APP_GUARD, useClass: AuthGuard },
    { provide: APP_GUARD, useClass: CredentialRateLimitGuard },
  ],
  exports: [ApiKeyStore, Authenticator],
})
export class IdentityModule implements OnApplicationBootstrap {
  constructor(
    private readonly keys: ApiKeyStore,
    @Inject(PG_POOL) private readonly pool: pg.Pool,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
    private readonly logger: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const file = await bootstrapAdminKey(this.pool, this.keys, this.config.dataDir);
    if (file) this.logger.warn({ file }, 'no credentials existed: created an admin key for tenant default; the file holds it');
  }
}
