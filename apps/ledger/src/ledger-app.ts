import 'reflect-metadata';
import type { Server } from 'node:http';
import { Logger as NestLogger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import express, { type NextFunction, type Request, type Response } from 'express';
import { Logger } from 'nestjs-pino';
import { AppModule, type AppOptions } from './app.module.js';
import { ApiError, ApiErrorFilter, sendError } from './http/api-error.js';
import { LedgerMetrics } from './metrics/ledger-metrics.js';
import { applyServerLimits } from './http/server-limits.js';
import { Authenticator } from './identity/authenticator.js';
import { credentialRefusal, type AuthenticatedRequest } from './identity/auth.guard.js';
import { PathIdsPipe } from './http/path-ids.pipe.js';
import { GATEWAY_PATH } from './gateway/provider-errors.js';
import { ledgerOpenApiDocument } from './api-contracts.js';

/** Builds the HTTP application on an already migrated database; `main` and the e2e tests both start it this way. */
export async function createLedgerApp(options: AppOptions): Promise<INestApplication> {
  // abortOnError false: a failure while building the modules reaches the caller, which stops what it started.
  const app = await NestFactory.create(AppModule.forRoot(options), {
    bufferLogs: true,
    bodyParser: false,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  const metrics = app.get(LedgerMetrics);
  applyServerLimits(app.getHttpServer() as Server, options.config.http, () => metrics.connectionEvicted());
  const limit = options.config.maxBodyBytes;
  // Decision 0029: the connection cap never closes a request in progress, so a body is read only for a
  // credential that verifies; without one a slowly sent body would hold a slot until the request timeout.
  // No public route takes a body. A credential that cannot be checked now (its identity provider or the key
  // store unreachable) is answered 503 before the body too: anyone can present a JWT.
  const authenticator = app.get(Authenticator);
  // The principal it verified is the AuthGuard's, so a request's credential is verified once.
  app.use((request: AuthenticatedRequest, _response: Response, next: NextFunction) => {
    if (!carriesBody(request)) return next();
    Promise.resolve()
      .then(() => authenticator.authenticate(request.headers))
      .then(
        (principal) => {
          request.principal = principal;
          next();
        },
        (error: unknown) => next(credentialRefusal(error)),
      );
  });
  // The gateway forwards the client's request bytes as they came; it reads them as JSON itself.
  app.use(GATEWAY_PATH, express.raw({ limit: options.config.gateway.maxRequestBytes, type: () => true }));
  app.use(express.json({ limit, type: ['application/json', 'application/*+json'] }));
  app.use(
    express.text({ limit, type: ['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'text/plain'] }),
  );
  // A body no parser read would reach the routes as no body at all, and most fields are optional: refuse it.
  app.use((request: Request, _response: Response, next: NextFunction) => {
    if (!carriesBody(request) || request.body !== undefined) return next();
    next(
      new ApiError(
        415,
        'unsupported_media_type',
        'send application/json (chunks also as application/x-ndjson)',
        'content-type',
      ),
    );
  });
  // Body-parser failures happen before Nest routes the request: answer them in the same shape.
  const logger = new NestLogger('HTTP');
  const countRefusal = (status: number, reason: string) => metrics.requestRefused(status, reason);
  // Express knows an error handler by its four parameters.
  app.use((error: unknown, _request: Request, response: Response, _next: NextFunction) =>
    sendError(response, error, logger, countRefusal),
  );
  app.useGlobalFilters(new ApiErrorFilter(countRefusal));
  app.useGlobalPipes(new PathIdsPipe());
  // Generated from the routes' contracts (api-contracts.ts); SwaggerModule only serves it and its UI.
  const document = ledgerOpenApiDocument() as unknown as OpenAPIObject;
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs/openapi.json' });
  return app;
}

function carriesBody(request: Request): boolean {
  return request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
}
