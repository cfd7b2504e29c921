import { ArgumentsHost, Catch, HttpException, Logger, type ExceptionFilter } from '@nestjs/common';
import { ChunkValidationError, ModelCallRequestError, SessionError, ToolCallError } from '#core';
import { databaseFailure, InvalidEventError, WrongExpectedRevisionError, type DatabaseFailure } from '#event-log';
import type { FastifyReply } from 'fastify';
import { ZodError } from 'zod';
import { errorShapeOf, providerErrorBody } from '../gateway/provider-errors.js';

/** A 4xx the client can act on: `{ error: { code, message, field? } }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    /** For refusals (401, 403, 429): why, as counted in /metrics; never sent to the client. */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** A 503 for something behind or busy for now: sent with `Retry-After`. */
export class RetryLater extends ApiError {
  constructor(code: string, message: string, field?: string) {
    super(503, code, message, field);
  }
}

const SESSION_ERROR_STATUS: Record<SessionError['code'], number> = {
  session_not_found: 404,
  message_not_found: 404,
  source_not_found: 404,
  session_exists: 409,
  message_exists: 409,
  parent_not_found: 422,
  not_a_child: 422,
  not_assistant: 422,
  seq_gap: 409,
  seq_conflict: 409,
  not_a_writer: 403,
  invalid_event: 400,
  dialect_conflict: 409,
  invalid_message: 400,
  block_not_found: 422,
  session_full: 409,
  message_full: 409,
  fork_too_deep: 422,
};

const TOOLCALL_ERROR_STATUS: Record<ToolCallError['code'], number> = {
  toolcall_not_found: 404,
  toolcall_exists: 409,
  wrong_state: 409,
  already_decided: 409,
  expired: 409,
  not_due: 409,
  arguments_mismatch: 422,
  self_approval: 403,
  already_approved: 409,
};

/** What a body the service does not read (415) is told. */
export const MEDIA_TYPES_READ = 'send application/json (chunks also as application/x-ndjson)';

/** The code of a refusal Fastify or a plugin (the Swagger UI's files) made, by its status. */
const CLIENT_ERROR_CODES: Readonly<Record<number, string>> = { 403: 'forbidden', 404: 'not_found' };

/** What a request that failed on the database is told (decision 0063). */
const DATABASE_FAILURES: Readonly<Record<DatabaseFailure, () => ApiError>> = {
  busy: () => new RetryLater('database_busy', 'no database connection came free in time; retry later'),
  unavailable: () => new RetryLater('database_unavailable', 'the database cannot be reached now; retry later'),
  timeout: () =>
    new RetryLater(
      'database_timeout',
      'the database did not finish the request in time; nothing was done; retry later',
    ),
  // Not "retry later": a write may have committed before the connection broke.
  lost: () =>
    new ApiError(
      503,
      'database_connection_lost',
      'the connection to the database broke during the request: a write in it may have been stored; ' +
        'retry with the same ids (sessions, messages, forks and chunk seqs are idempotent) or read first',
    ),
};

/** Counts refused requests (401, 403, 429) by reason. */
export type RefusalCounter = (status: number, reason: string) => void;

/** Turns every failure into the API's error body; anything unexpected is a logged 500 without internals. */
@Catch()
export class ApiErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('ApiErrorFilter');

  constructor(private readonly countRefusal: RefusalCounter) {}

  catch(thrown: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const failure = databaseFailure(thrown);
    // A read whose connection broke wrote nothing: it is as safe to retry as one that found no connection.
    const safe = failure === 'lost' && (reply.request.method === 'GET' || reply.request.method === 'HEAD');
    const error = failure ? DATABASE_FAILURES[safe ? 'unavailable' : failure]() : thrown;
    const { status, body } = describeError(error, reply.request.routeOptions.bodyLimit);
    // The request named by method and path only: its headers and query may carry credentials.
    const path = reply.request.url.split('?', 1)[0];
    if (status >= 500) this.logger.error({ err: thrown, method: reply.request.method, path });
    if (status === 401 || status === 403 || status === 429)
      this.countRefusal(status, (error as { reason?: string }).reason ?? body.code);
    // A response already under way (a live feed, a relayed stream) can only be cut short.
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.end();
      return;
    }
    if (status === 401) reply.header('WWW-Authenticate', 'Bearer realm="block-ledger"');
    if (error instanceof RetryLater) reply.header('Retry-After', '1');
    // The gateway's clients are provider SDKs: they read errors in their provider's shape.
    const shape = errorShapeOf(reply.request.routeOptions.url ?? path);
    void reply.status(status).send(shape ? providerErrorBody(shape, { status, ...body }) : { error: body });
  }
}

function describeError(
  error: unknown,
  bodyLimit: number | undefined,
): { status: number; body: { code: string; message: string; field?: string } } {
  if (error instanceof ModelCallRequestError) {
    const field = error.field || '(body)';
    return { status: 400, body: withField('invalid_request', `${field}: ${error.message}`, field) };
  }
  if (error instanceof ApiError)
    return { status: error.status, body: withField(error.code, error.message, error.field) };
  if (error instanceof SessionError)
    return { status: SESSION_ERROR_STATUS[error.code], body: withField(error.code, error.message, error.field) };
  if (error instanceof ToolCallError)
    return { status: TOOLCALL_ERROR_STATUS[error.code], body: withField(error.code, error.message, error.field) };
  if (error instanceof ChunkValidationError)
    return { status: 400, body: withField('invalid_chunk', error.message, `chunks[${error.index}].${error.field}`) };
  if (error instanceof ZodError) {
    const issue = error.issues[0];
    const field = issue.path.join('.') || (issue.code === 'unrecognized_keys' ? issue.keys.join(',') : '(body)');
    return {
      status: 400,
      body: withField(
        'invalid_request',
        `${field}: ${issue.code === 'unrecognized_keys' ? 'is not an accepted field' : issue.message}`,
        field,
      ),
    };
  }
  if (error instanceof InvalidEventError)
    return { status: 400, body: withField('invalid_event', error.message, error.field) };
  if (error instanceof WrongExpectedRevisionError)
    return { status: 409, body: withField('concurrent_write', 'the session changed concurrently; retry the request') };
  // What Fastify and its plugins refuse before Nest routes a request, which Nest hands on wrapped.
  if (error instanceof HttpException && error.cause !== undefined) return describeError(error.cause, bodyLimit);
  const refusal = error as { code?: string; statusCode?: number; message: string; decodeFailure?: boolean };
  if (refusal.decodeFailure === true)
    return {
      status: 400,
      body: withField('bad_request', 'the request body does not decode as its Content-Encoding says', '(body)'),
    };
  if (refusal.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return {
      status: 413,
      body: withField('body_too_large', `the request body exceeds ${bodyLimit ?? 'the size limit in'} bytes`, '(body)'),
    };
  if (refusal.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return {
      status: 415,
      body: withField('unsupported_media_type', MEDIA_TYPES_READ, 'content-type'),
    };
  if (refusal.statusCode !== undefined && refusal.statusCode >= 400 && refusal.statusCode < 500)
    return {
      status: refusal.statusCode,
      body: withField(CLIENT_ERROR_CODES[refusal.statusCode] ?? 'bad_request', refusal.message),
    };
  // Nest's 404 names the whole request target, query included, which may carry a credential.
  if (error instanceof HttpException && error.getStatus() === 404)
    return { status: 404, body: withField('not_found', 'no route serves this path') };
  if (error instanceof HttpException)
    return { status: error.getStatus(), body: withField('http_error', error.message) };
  return { status: 500, body: withField('internal', 'internal error') };
}

function withField(code: string, message: string, field?: string) {
  return field === undefined ? { code, message } : { code, message, field };
}
