import { Controller, Get } from '@nestjs/common';
import { CurrentPrincipal } from './current-principal.js';
import type { Principal } from './principal.js';

/** Who the credential is, as the ledger records it: the console shows it and hides what the roles cannot do. */
@Controller('v1/me')
export class MeController {
  @Get()
  me(@CurrentPrincipal() principal: Principal) {
    const { actor, subject, tenant, roles } = principal;
    return { actor, subject, tenant, roles: [...roles].sort() };
  }
}
