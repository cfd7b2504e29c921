import { z } from 'zod';
import { positionNumber, type RouteContracts } from '../http/route-contract.js';
import { decisionBody, listQuery } from './tool-calls.controller.js';

const toolCall = z.looseObject({
  id: z.string(),
  sessionId: z.string(),
  messageId: z.string(),
  toolId: z.string(),
  tool: z.object({ server: z.string(), name: z.string() }),
  arguments: z.unknown(),
  argumentsSha256: z.string(),
  requestedBy: z.string(),
  status: z.string(),
  outcome: z.string().nullable(),
  firewall: z.unknown(),
  guardian: z.unknown(),
  approval: z.unknown(),
  decision: z.unknown(),
  execution: z.unknown(),
  position: positionNumber,
});
const requested = {
  requestedPosition: positionNumber.meta({ description: "the position of the call's first event" }),
  requestedAt: z.string(),
};
const NOT_FOUND = { 404: 'no such tool call' };
const DECISION_ERRORS = {
  ...NOT_FOUND,
  403: '`self_approval`: the requester’s subject may not decide',
  409: 'already decided, `already_approved` by this subject, or `expired`',
  422: '`argumentsSha256` is not the call’s',
};

export const TOOL_CALLS_CONTRACT: RouteContracts = {
  'GET /v1/tool-calls': {
    summary: 'Governed tool calls, in the order they were requested',
    description:
      '`?state=awaiting_approval` is the approval queue. From the read model; `?minPosition=p` waits (up to 5 s) ' +
      'until it reflects `p`.',
    query: listQuery,
    responses: {
      200: { description: 'the calls', schema: z.object({ toolCalls: z.array(toolCall.extend(requested)) }) },
    },
    errors: {
      422: '`?minPosition` beyond the log head (`position_beyond_head`)',
      503: 'the read model did not reach `?minPosition` within 5 s; retry',
    },
  },
  'GET /v1/tool-calls/:id': {
    summary: 'One call folded from its stream, with its event trail',
    responses: {
      200: {
        description: 'the call',
        schema: toolCall.extend({ ...requested, events: z.array(z.looseObject({ type: z.string() })) }),
      },
    },
    errors: NOT_FOUND,
  },
  'POST /v1/tool-calls/:id/approve': {
    summary: "A reviewer's approval",
    body: { schema: decisionBody },
    responses: { 200: { description: 'the call after the decision', schema: toolCall } },
    errors: DECISION_ERRORS,
  },
  'POST /v1/tool-calls/:id/deny': {
    summary: "A reviewer's denial",
    body: { schema: decisionBody },
    responses: { 200: { description: 'the call after the decision', schema: toolCall } },
    errors: DECISION_ERRORS,
  },
};
