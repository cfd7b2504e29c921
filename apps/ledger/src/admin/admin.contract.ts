import { z } from 'zod';
import { positionNumber, type RouteContracts } from '../http/route-contract.js';
import { rebuildQuery } from './admin.controller.js';

const totals = z.object({ events: z.number().int(), position: positionNumber, durationMs: z.number().int() });

export const ADMIN_CONTRACT: RouteContracts = {
  'POST /v1/admin/rebuild': {
    summary: 'Rebuild the read models from the log (one at a time across instances)',
    description: "The operator's: admins of the default tenant only.",
    query: rebuildQuery,
    responses: {
      200: {
        description: 'totals, and per projection',
        schema: totals.extend({ projections: z.record(z.string(), totals) }),
      },
    },
  },
};
