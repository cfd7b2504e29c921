import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { ANONYMOUS_ACTOR } from '#event-log';
import type { Request } from 'express';
import { ApiError } from './api-error.js';

/**
 * Who is calling, until authentication exists: the `X-Ledger-Actor` header, else `anonymous`.
 * It is recorded on every event the request appends, and it is what the approval rule compares
 * (a call's requester may not approve it).
 */
export const ACTOR_HEADER = 'x-ledger-actor';
const ACTOR_PATTERN = /^[\w.@:+-]{1,200}$/;

export const Actor = createParamDecorator((_data: unknown, context: ExecutionContext): string => {
  const value = context.switchToHttp().getRequest<Request>().headers[ACTOR_HEADER];
  if (value === undefined) return ANONYMOUS_ACTOR;
  if (typeof value !== 'string' || !ACTOR_PATTERN.test(value)) throw new ApiError(400, 'invalid_actor', `${ACTOR_HEADER} must be 1 to 200 letters, digits or . _ @ : + -`, ACTOR_HEADER);
  return value;
});
