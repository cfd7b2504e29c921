import { Global, Inject, Module, type OnApplicationBootstrap } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import type pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { PG_POOL } from '../database/pg-pool-token.js';
import { ApiKeyStore } from './api-key-store.js';
import { AuthGuard } from './auth.guard.js';
import { Authenticator, JWT_VERIFIER } from './authenticator.js';
import { createJwtVerifier } from './jwt-verifier.js';
import { bootstrapAdminKey } from './bootstrap-admin-key.js';
import { CredentialRateLimiter } from './credential-rate-limiter.js';
import { CredentialWatch } from './credential-watch.js';
import { KeysController } from './keys.controller.js';
import { MeController } from './me.controller.js';

/** Credentials, the guard every request passes, per-credential limits, the watch on open feeds' credentials, and the first admin key. */
@Global()
@Module({
  controllers: [KeysController, MeController],
  providers: [
    ApiKeyStore,
    Authenticator,
    CredentialWatch,
    {
      provide: CredentialRateLimiter,
      inject: [LEDGER_CONFIG],
      useFactory: ({ identity }: LedgerConfig) =>
        new CredentialRateLimiter(identity.rateLimit.limit, identity.rateLimit.windowMs),
    },
    {
      provide: JWT_VERIFIER,
      inject: [LEDGER_CONFIG],
      useFactory: ({ oidc }: LedgerConfig) => (oidc ? createJwtVerifier(oidc) : undefined),
    },
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [ApiKeyStore, Authenticator, CredentialWatch],
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
    if (file)
      this.logger.warn({ file }, 'no credentials existed: created an admin key for tenant default; the file holds it');
  }
}
