import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';

const indicator = z.looseObject({
  status: z.enum(['up', 'down']),
  engine: z.string().optional(),
  appendLockHeldMs: z.number().nullable().optional(),
  message: z.string().optional(),
});
const health = z.object({
  status: z.enum(['ok', 'error']),
  info: z.record(z.string(), indicator).optional(),
  error: z.record(z.string(), indicator).optional(),
  details: z.record(z.string(), indicator),
});

export const HEALTH_CONTRACT: RouteContracts = {
  'GET /health': {
    summary: 'Database ping and the event log’s state; no data',
    responses: {
      200: { description: 'up', schema: health },
      503: { description: 'down: the database or the event log (a writer stalled on the append lock)', schema: health },
    },
  },
};
