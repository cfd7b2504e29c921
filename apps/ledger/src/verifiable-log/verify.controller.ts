import { Controller, Get, Inject, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { SessionExporter } from './session-export.js';
import { StreamVerifier } from './stream-verifier.js';

export const exportQuery = z.object({
  since: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, 'must be the tree size of a checkpoint you hold (a positive whole number)')
    .transform(BigInt)
    .optional(),
});

/**
 * The auditor's checks of one session or tool call against its chains and the signed Merkle log, and
 * session exports.
 */
@Controller('v1')
export class VerifyController {
  constructor(
    @Inject(StreamVerifier) private readonly verifier: StreamVerifier,
    @Inject(SessionExporter) private readonly exporter: SessionExporter,
  ) {}

  @Get('sessions/:sid/verify')
  verifySession(@Param('sid') sessionId: string, @CurrentPrincipal() principal: Principal) {
    return this.verifier.verifySession(principal.tenant, sessionId);
  }

  @Get('tool-calls/:id/verify')
  verifyToolCall(@Param('id') toolCallId: string, @CurrentPrincipal() principal: Principal) {
    return this.verifier.verifyToolCall(principal.tenant, toolCallId);
  }

  /**
   * NDJSON, an event a line; built (and the export recorded) before anything is sent, so a refusal
   * is a plain 4xx.
   */
  @Get('sessions/:sid/export')
  async exportSession(
    @Param('sid') sessionId: string,
    @Query() query: unknown,
    @CurrentPrincipal() principal: Principal,
    @Res() response: FastifyReply,
  ): Promise<void> {
    const { since } = exportQuery.parse(query);
    const lines = await this.exporter.export(principal, sessionId, since, new Date());
    void response.type('application/x-ndjson').send(lines.map((line) => `${line}\n`).join(''));
  }
}
