import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, RetryLater } from '../http/api-error.js';
import { Authenticator } from './authenticator.js';
import { CredentialRateLimiter } from './credential-rate-limiter.js';
import { IdentityProviderUnavailableError } from './identity-provider-error.js';
import { OPERATOR_ROUTES, PERMISSIONS } from './permissions.js';
import { AuthenticationError, DEFAULT_TENANT, type Principal } from './principal.js';

export type AuthenticatedRequest = FastifyRequest & { principal?: Principal };

/**
 * `METHOD /path` as the router declared the route: the permission table's key. Fastify answers
 * HEAD with the GET route's handler, so HEAD is judged as that GET.
 */
export function routeKey(method: string, url: string): string {
  return `${method === 'HEAD' ? 'GET' : method} ${url}`;
}

/** The answer to a credential that did not verify; an error that says nothing of the credential is passed on. */
export function credentialRefusal(error: unknown): unknown {
  if (error instanceof AuthenticationError)
    return new ApiError(401, 'unauthenticated', 'a valid credential is required', undefined, error.reason);
  // The token may be fine: the provider's keys could not be had. Say so, not "bad credential".
  if (error instanceof IdentityProviderUnavailableError)
    return new RetryLater('identity_provider_unavailable', 'the identity provider cannot be reached; retry later');
  return error;
}

const notOpen = () => new ApiError(403, 'forbidden', 'this route is not open to any credential');

/**
 * Why `principal` may not take `route` (a credential route: not public), or undefined when it may: it must hold
 * one of the route's roles, and an operator route needs the default tenant. The guard asks it of every request, and
 * an open live feed again whenever its credential may have changed (CredentialWatch).
 */
export function routeRefusal(route: string, principal: Principal): ApiError | undefined {
  const rule = PERMISSIONS[route];
  if (rule === undefined || rule === 'public') return notOpen();
  if (!rule.some((role) => principal.roles.has(role)))
    return new ApiError(403, 'forbidden', `this route needs one of the roles: ${rule.join(', ')}`, undefined, 'role');
  if (OPERATOR_ROUTES.has(route) && principal.tenant !== DEFAULT_TENANT) {
    const message = 'this route acts on every tenant; it is for admins of the default tenant';
    return new ApiError(403, 'forbidden', message, undefined, 'tenant');
  }
  return undefined;
}

/**
 * The one place that lets a request in: the route must be in the permission table, the
 * credential must verify, it must hold one of the route's roles, and its rate budget must allow it. What the credential says is
 * then the request's principal; nothing the client claims about itself counts.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly authenticator: Authenticator,
    private readonly rateLimiter: CredentialRateLimiter,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const route = routeKey(request.method, request.routeOptions.url ?? request.url);
    const rule = PERMISSIONS[route];
    if (rule === undefined) throw notOpen();
    if (rule === 'public') return true;
    let principal: Principal;
    try {
      principal = request.principal ?? (await this.authenticator.authenticate(request.raw));
    } catch (error) {
      throw credentialRefusal(error);
    }
    const refused = routeRefusal(route, principal);
    if (refused) throw refused;
    const waitMs = this.rateLimiter.take(principal.credentialId);
    if (waitMs > 0) {
      context
        .switchToHttp()
        .getResponse<FastifyReply>()
        .header('Retry-After', String(Math.ceil(waitMs / 1_000)));
      throw new ApiError(
        429,
        'rate_limited',
        'too many requests for this credential; retry after Retry-After seconds',
        undefined,
        'rate',
      );
    }
    request.principal = principal;
    return true;
  }
}
