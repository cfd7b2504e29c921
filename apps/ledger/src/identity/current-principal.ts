import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { AuthenticatedRequest } from './auth.guard.js';
import type { Principal } from './principal.js';

/** The request's verified principal (the guard has put it there on every non-public route). */
export const CurrentPrincipal = createParamDecorator((_data: unknown, context: ExecutionContext): Principal => {
  const principal = context.switchToHttp().getRequest<AuthenticatedRequest>().principal;
  if (!principal)
    throw new Error('no principal on an authenticated route: is the route public in the permission table?');
  return principal;
});
