import { Injectable, type ExecutionContext } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { AuthenticatedRequest } from './auth.guard.js';
import type { Principal } from './principal.js';

/**
 * Per-credential request rate (runs after AuthGuard): one budget per credential across every
 * route, so spreading requests over routes gains nothing. Public routes are not counted.
 */
@Injectable()
export class CredentialRateLimitGuard extends ThrottlerGuard {
  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    return context.switchToHttp().getRequest<AuthenticatedRequest>().principal === undefined;
  }

  protected override async getTracker(request: Record<string, unknown>): Promise<string> {
    return (request as { principal: Principal }).principal.credentialId;
  }

  protected override generateKey(_context: ExecutionContext, tracker: string, throttler: string): string {
    return `${throttler}:${tracker}`;
  }
}
