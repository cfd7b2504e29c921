import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';

export const ME_CONTRACT: RouteContracts = {
  'GET /v1/me': {
    summary: 'Who the credential is, as the ledger records it',
    responses: {
      200: {
        description: 'the principal',
        schema: z.object({
          actor: z.string(),
          subject: z.string(),
          tenant: z.string(),
          roles: z.array(z.string()),
        }),
      },
    },
  },
};
