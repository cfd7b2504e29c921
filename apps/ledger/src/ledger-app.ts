import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import { Logger } from 'nestjs-pino';
import { AppModule, type AppOptions } from './app.module.js';
import { connectionRefusal, routerRefusal } from './http/adapter-refusals.js';
import { ApiErrorFilter } from './http/api-error.js';
import { readRequestBodies } from './http/request-bodies.js';
import { LedgerMetrics } from './metrics/ledger-metrics.js';
import { applyServerLimits } from './http/server-limits.js';
import { Authenticator } from './identity/authenticator.js';
import { credentialRefusal, routeKey, type AuthenticatedRequest } from './identity/auth.guard.js';
import { PathIdsPipe } from './http/path-ids.pipe.js';
import { GATEWAY_PATH } from './gateway/provider-errors.js';
import { ledgerOpenApiDocument } from './api-contracts.js';
import { serveApiDocs } from './http/api-docs.js';

/** Node refuses a request line and headers beyond 16 KiB, so no path parameter is longer. */
const MAX_PATH_PARAMETER_LENGTH = 16_384;

const DECLARED_ROUTES = new WeakMap<INestApplication, readonly string[]>();

/** Every route the app serves, as the guard keys it (`METHOD /path`): the permission table must hold each. */
export function declaredRoutes(app: INestApplication): readonly string[] {
  return DECLARED_ROUTES.get(app) ?? [];
}

/** Builds the HTTP application on an already migrated database; `main` and the e2e tests both start it this way. */
export async function createLedgerApp(options: AppOptions): Promise<INestApplication> {
  const { config } = options;
  // Decision 0043: Fastify, for a sixth less CPU per chunk than Express at fleet load.
  const adapter = new FastifyAdapter({
    bodyLimit: config.maxBodyBytes,
    // Routing as it was under Express: a trailing slash and letter case do not matter. An id longer
    // than the pipe allows must reach the pipe, to be refused by name rather than as an unknown route.
    routerOptions: { ignoreTrailingSlash: true, caseSensitive: false, maxParamLength: MAX_PATH_PARAMETER_LENGTH },
    frameworkErrors: routerRefusal,
    clientErrorHandler: connectionRefusal,
  });
  // abortOnError false: a failure while building the modules reaches the caller, which stops what it started.
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(options), adapter, {
    bufferLogs: true,
    bodyParser: false,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  const metrics = app.get(LedgerMetrics);
  applyServerLimits(app.getHttpServer(), config.http, () => metrics.connectionEvicted());
  const fastify = app.getHttpAdapter().getInstance();
  const routes: string[] = [];
  DECLARED_ROUTES.set(app, routes);
  // HEAD routes are Fastify's copies of GET routes, judged as them.
  fastify.addHook('onRoute', ({ method, url }) => {
    for (const verb of [method].flat()) if (verb !== 'HEAD') routes.push(routeKey(verb, url));
  });
  // Decision 0029: the connection cap never closes a request in progress, so a body is read only for a
  // credential that verifies; without one a slowly sent body would hold a slot until the request timeout.
  // No public route takes a body. A credential that cannot be checked now (its identity provider or the key
  // store unreachable) is answered 503 before the body too: anyone can present a JWT.
  const authenticator = app.get(Authenticator);
  // The principal it verified is the AuthGuard's, so a request's credential is verified once.
  fastify.addHook('onRequest', async (request: AuthenticatedRequest) => {
    if (!carriesBody(request)) return;
    try {
      request.principal = await authenticator.authenticate(request.raw);
    } catch (error) {
      throw credentialRefusal(error);
    }
  });
  // Answers are a tenant's data, fetched with a credential: no cache keeps them (a browser's disk cache outlived a
  // console's sign-out), and no browser reads them as another type. Routes that say otherwise (the console's files,
  // the API docs) keep what they say.
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    if (!reply.hasHeader('x-content-type-options')) void reply.header('x-content-type-options', 'nosniff');
    done(null, payload);
  });
  readRequestBodies(fastify, { path: GATEWAY_PATH, maxBytes: config.gateway.maxRequestBytes });
  // Failures before Nest routes a request (hooks, body parsing) reach the same filter through Nest's error handler.
  app.useGlobalFilters(new ApiErrorFilter((status, reason) => metrics.requestRefused(status, reason)));
  app.useGlobalPipes(new PathIdsPipe());
  // Generated from the routes' contracts (api-contracts.ts).
  serveApiDocs(fastify, ledgerOpenApiDocument);
  return app;
}

function carriesBody(request: FastifyRequest): boolean {
  return request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
}
