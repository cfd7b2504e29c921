import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';
import { listQuery, newKeyBody } from './key-requests.js';

const keyRecord = z.object({
  id: z.string(),
  name: z.string(),
  tenant: z.string(),
  roles: z.array(z.string()),
  subject: z.string().nullable(),
  expiresAt: z.string().nullable(),
  createdBy: z.string(),
  createdAt: z.string(),
  revokedAt: z.string().nullable(),
  revokedBy: z.string().nullable(),
  lastUsedAt: z.string().nullable(),
  suffix: z.string(),
});

export const KEYS_CONTRACT: RouteContracts = {
  'POST /v1/admin/keys': {
    summary: 'Make an API key',
    body: { schema: newKeyBody },
    responses: {
      201: {
        description: 'the key; `key` is the only time the secret is shown',
        schema: keyRecord.extend({ key: z.string() }),
      },
    },
  },
  'GET /v1/admin/keys': {
    summary: 'List keys, without secrets',
    query: listQuery,
    responses: { 200: { description: 'the keys', schema: z.object({ keys: z.array(keyRecord) }) } },
  },
  'DELETE /v1/admin/keys/:id': {
    summary: 'Revoke a key',
    responses: { 200: { description: 'the revoked key', schema: keyRecord } },
    errors: { 404: 'no such key' },
  },
};
