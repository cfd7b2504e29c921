import { z } from 'zod';
import { type RouteContracts } from '../http/route-contract.js';

export const CONSOLE_CONTRACT: RouteContracts = {
  'GET /console': {
    summary: 'The reviewer console (a web app on this API)',
    responses: { 200: { description: 'the app’s page', mediaType: 'text/html' } },
  },
  'GET /v1/console/config': {
    summary: 'How the console signs people in',
    responses: {
      200: {
        description: 'the OpenID provider and the console’s public client id, when configured',
        schema: z.object({ oidc: z.object({ issuer: z.string(), clientId: z.string() }).nullable() }),
      },
    },
  },
};

/** The console's built files: static assets of the app, not operations of the API. */
export const CONSOLE_FILE_ROUTES = ['GET /console/*'];
