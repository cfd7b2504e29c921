import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';
import { checkpointQuery, consistencyQuery, inclusionQuery } from './log.controller.js';
import { exportQuery } from './verify.controller.js';

const verification = z.looseObject({
  ok: z.boolean(),
  checkedEvents: z.number().int(),
  streams: z.array(z.unknown()),
  checkpoint: z.unknown(),
  firstBroken: z.looseObject({ stream: z.string(), reason: z.string() }).optional(),
});
const decimal = z.string().regex(/^\d+$/);
const TEXT = 'text/plain';

export const VERIFIABLE_LOG_CONTRACT: RouteContracts = {
  'GET /v1/sessions/:sid/verify': {
    summary: "Recompute a session's chains and check them against the signed Merkle log",
    responses: { 200: { description: 'the verification', schema: verification } },
    errors: { 404: 'no such session' },
  },
  'GET /v1/tool-calls/:id/verify': {
    summary: "Recompute a tool call's chain and check it against the signed Merkle log",
    responses: { 200: { description: 'the verification', schema: verification } },
    errors: { 404: 'no such tool call' },
  },
  'GET /v1/sessions/:sid/export': {
    summary: 'An NDJSON bundle an auditor verifies offline (`npm run verify`)',
    query: exportQuery,
    responses: { 200: { description: 'manifest, events with proofs, checkpoint', mediaType: 'application/x-ndjson' } },
    errors: {
      404: 'no such session',
      409: '`not_in_log`: an event is not in the signed log (run verify); `tree_damaged`: the stored tree lacks a node',
    },
  },
  'GET /v1/log/checkpoint': {
    summary: 'The latest (or that size’s) signed checkpoint, C2SP tlog-checkpoint text',
    query: checkpointQuery,
    responses: { 200: { description: 'a signed note', mediaType: TEXT, schema: z.string() } },
    errors: { 404: 'no checkpoint at that size' },
  },
  'GET /v1/log/key': {
    summary: "The checkpoints' verifier key (public)",
    responses: { 200: { description: 'a note verifier key', mediaType: TEXT, schema: z.string() } },
  },
  'GET /v1/log/proof/inclusion': {
    summary: 'RFC 9162 inclusion proof of the event at a position',
    description: 'Sizes and indices as decimal strings, as RFC 9162 tooling reads them; hashes in base64.',
    query: inclusionQuery,
    responses: {
      200: {
        description: 'the proof',
        schema: z.object({ position: decimal, leafIndex: decimal, treeSize: decimal, hashes: z.array(z.string()) }),
      },
    },
    errors: { 404: 'no checkpoint yet, or the position is not in the tree', 422: '`beyond_tree`' },
  },
  'GET /v1/log/proof/consistency': {
    summary: 'RFC 9162 consistency proof between two tree sizes',
    query: consistencyQuery,
    responses: {
      200: {
        description: 'the proof',
        schema: z.object({ from: decimal, to: decimal, hashes: z.array(z.string()) }),
      },
    },
    errors: { 409: '`tree_damaged`: the stored tree lacks a node the proof needs', 422: '`beyond_tree`' },
  },
};
