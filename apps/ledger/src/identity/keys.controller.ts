import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiError } from '../http/api-error.js';
import { ApiKeyStore } from './api-key-store.js';
import { CurrentPrincipal } from './current-principal.js';
import { listQuery, parseNewKey } from './key-requests.js';
import { DEFAULT_TENANT, type Principal } from './principal.js';

/**
 * Credentials. An admin manages its own tenant's keys; an admin of the default tenant (the
 * operator's) may name any tenant. Another tenant's key is not found.
 */
@Controller('v1/admin/keys')
export class KeysController {
  constructor(private readonly keys: ApiKeyStore) {}

  @Post()
  @HttpCode(201)
  create(@Body() body: unknown, @CurrentPrincipal() principal: Principal) {
    const input = parseNewKey(body, Date.now());
    return this.keys.create(
      { ...input, tenant: managedTenant(principal, input.tenant) ?? principal.tenant },
      principal.actor,
    );
  }

  @Get()
  async list(@Query() query: unknown, @CurrentPrincipal() principal: Principal) {
    const { tenant: asked } = listQuery.parse(query);
    return { keys: await this.keys.list(managedTenant(principal, asked)) };
  }

  @Delete(':id')
  revoke(@Param('id') id: string, @CurrentPrincipal() principal: Principal) {
    return this.keys.revoke(id, principal.tenant === DEFAULT_TENANT ? undefined : principal.tenant, principal.actor);
  }
}

/** The tenant an admin acts on: its own, or for the operator's admins any tenant asked for (undefined: all). */
function managedTenant(principal: Principal, asked: string | undefined): string | undefined {
  if (principal.tenant === DEFAULT_TENANT) return asked;
  if (asked !== undefined && asked !== principal.tenant)
    throw new ApiError(403, 'forbidden', 'an admin manages the keys of its own tenant', 'tenant', 'tenant');
  return principal.tenant;
}
