import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';
import { SESSION_HEADER } from './model-call-proxy.js';

const providerRequest = (what: string) =>
  z
    .looseObject({ model: z.string(), stream: z.boolean().optional() })
    .meta({ description: `${what}, as the SDK sends it` });
const headers = {
  [SESSION_HEADER]: {
    description: 'the session to record into (created on its first call); none = a session per call',
    schema: z.string(),
  },
};
const answer = {
  200: {
    description:
      "the provider's answer byte for byte (JSON, or its event stream when `stream: true`), with `X-Ledger-Session`, " +
      '`X-Ledger-Message` and `X-Ledger-Position`',
    schema: z.looseObject({}),
  },
};
const errors = {
  404: 'no upstream serves this model',
  409: '`session_full`: the session has no room to record the call (decision 0037); no answer is relayed unrecorded',
  502: 'the provider failed',
  503: 'the log cannot record',
};
const description = "Errors come in the provider's own shape, so the SDK raises its own exceptions.";

export const GATEWAY_CONTRACT: RouteContracts = {
  'POST /gateway/openai/v1/chat/completions': {
    summary: 'OpenAI Chat Completions, recorded',
    description,
    headers,
    body: { schema: providerRequest('a Chat Completions request') },
    responses: answer,
    errors,
  },
  'POST /gateway/openai/v1/responses': {
    summary: 'OpenAI Responses, recorded',
    description,
    headers,
    body: { schema: providerRequest('a Responses request') },
    responses: answer,
    errors,
  },
  'POST /gateway/anthropic/v1/messages': {
    summary: 'Anthropic Messages, recorded',
    description,
    headers,
    body: { schema: providerRequest('a Messages request') },
    responses: answer,
    errors,
  },
};
