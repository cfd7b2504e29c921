import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';

export const METRICS_CONTRACT: RouteContracts = {
  'GET /metrics': {
    summary: 'Prometheus metrics',
    description: "The operator's: admins of the default tenant only.",
    responses: { 200: { description: 'the exposition format', mediaType: 'text/plain', schema: z.string() } },
  },
};
