import { Controller, Get, Inject, Param } from '@nestjs/common';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { StreamVerifier } from './stream-verifier.js';

/** The auditor's checks of one session or tool call against its chains and the signed Merkle log. */
@Controller('v1')
export class VerifyController {
  constructor(@Inject(StreamVerifier) private readonly verifier: StreamVerifier) {}

  @Get('sessions/:sid/verify')
  verifySession(@Param('sid') sessionId: string, @CurrentPrincipal() principal: Principal) {
    return this.verifier.verifySession(principal.tenant, sessionId);
  }

  @Get('tool-calls/:id/verify')
  verifyToolCall(@Param('id') toolCallId: string, @CurrentPrincipal() principal: Principal) {
    return this.verifier.verifyToolCall(principal.tenant, toolCallId);
  }
}
