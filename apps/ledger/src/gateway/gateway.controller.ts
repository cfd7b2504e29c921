import { Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import type { GatewayProtocol } from '#core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentPrincipal } from '../identity/current-principal.js';
import type { Principal } from '../identity/principal.js';
import { ModelCallProxy } from './model-call-proxy.js';

/**
 * Provider-compatible endpoints: a client records into the ledger by pointing its SDK's base URL
 * here (`…/gateway/openai/v1`, `…/gateway/anthropic`) and using a ledger producer key.
 */
@Controller('gateway')
export class GatewayController {
  constructor(private readonly proxy: ModelCallProxy) {}

  @Post('openai/v1/chat/completions')
  @HttpCode(200)
  chatCompletions(
    @CurrentPrincipal() principal: Principal,
    @Req() request: FastifyRequest,
    @Res() response: FastifyReply,
  ) {
    return this.call('openai-chat', principal, request, response);
  }

  @Post('openai/v1/responses')
  @HttpCode(200)
  responses(@CurrentPrincipal() principal: Principal, @Req() request: FastifyRequest, @Res() response: FastifyReply) {
    return this.call('openai-responses', principal, request, response);
  }

  @Post('anthropic/v1/messages')
  @HttpCode(200)
  messages(@CurrentPrincipal() principal: Principal, @Req() request: FastifyRequest, @Res() response: FastifyReply) {
    return this.call('anthropic-messages', principal, request, response);
  }

  private call(protocol: GatewayProtocol, principal: Principal, request: FastifyRequest, response: FastifyReply) {
    return this.proxy.handle(protocol, principal, request, response);
  }
}
