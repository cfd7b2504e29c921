import { randomUUID } from 'node:crypto';
import { pipeline, type Readable } from 'node:stream';
import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  mayWrite,
  ModelCallRequestError,
  placeModelCall,
  SessionError,
  readModelCallRequest,
  SDK_READING,
  SseEventReader,
  type DialectName,
  type GatewayProtocol,
  type ModelCallRequest,
  type SessionState,
} from '#core';
import { isUtf8 } from 'node:buffer';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LEDGER_CONFIG, type LedgerConfig } from '../config/ledger-config.js';
import { ApiError } from '../http/api-error.js';
import { ID_CHARACTERS, ID_MAX_LENGTH, ID_RULE } from '../http/path-ids.pipe.js';
import type { Principal } from '../identity/principal.js';
import { LedgerMetrics } from '../metrics/ledger-metrics.js';
import { authorOf, SessionRepository, type SessionRef } from '../sessions/session-repository.js';
import { AnswerRecording, type AnswerPlace } from './answer-recording.js';
import { UpstreamCaller, clientResponseHeaders, type UpstreamResponse } from './upstream-caller.js';
import { UpstreamPools } from './upstream-pools.js';
import type { UpstreamProtocol } from './upstreams-config.js';

export const SESSION_HEADER = 'x-ledger-session';

const NOT_RELAYED = { name: 'UpstreamError', message: 'the answer could not be relayed' };

/** Each protocol's route prefix on the gateway, and the dialect its answers are recorded in. */
/**
 * Each protocol's path under the upstream's base URL (a constant: never taken from the request,
 * whose target a client writes), the upstream protocol that answers it, and the dialect its
 * answers are recorded in.
 */
const PROTOCOLS: Record<
  GatewayProtocol,
  { readonly path: string; readonly upstream: UpstreamProtocol; readonly dialect: DialectName }
> = {
  'openai-chat': { path: '/chat/completions', upstream: 'openai', dialect: 'openai' },
  'openai-responses': { path: '/responses', upstream: 'openai', dialect: 'openai-responses' },
  'anthropic-messages': { path: '/messages', upstream: 'anthropic', dialect: 'anthropic' },
};

/**
 * The recording gateway (DESIGN §12): a model call goes to the provider through the key pool and
 * its answer back to the client byte for byte, as it arrives; beside the stream, the call is
 * placed in the session's tree and the provider's events are appended to the answer's message.
 * Nothing is recorded for a call no model answered (a refusal, an unknown model, an upstream error
 * before the answer began).
 */
@Injectable()
export class ModelCallProxy {
  private readonly logger = new Logger('Gateway');
  /**
   * The record under way of each session's last call. An SDK may send its next call the moment it
   * has read `[DONE]`, before that record is complete; the next call waits for it (bounded), so it
   * is placed against the answer it continues. Per instance: calls of one session on two
   * instances at once are placed against what each finds in the log.
   */
  private readonly recordsUnderWay = new Map<string, Promise<void>>();
  /** Whether the log took the last record tried here; until it fails, sessions cached here skip the log read. */
  private logHealthy = true;
  private readonly recordingObserver = {
    unrecordedEvents: (count: number) => this.metrics.gatewayRecording.unrecordedEvents(count),
    recordingFailed: (error: unknown) => this.recordingFailed(error),
  };

  constructor(
    private readonly sessions: SessionRepository,
    private readonly pools: UpstreamPools,
    private readonly caller: UpstreamCaller,
    private readonly metrics: LedgerMetrics,
    @Inject(LEDGER_CONFIG) private readonly config: LedgerConfig,
  ) {}

  async handle(
    protocol: GatewayProtocol,
    principal: Principal,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const response = reply.raw;
    const call = readModelCallRequest(protocol, jsonBody(request.body));
    const upstream = this.pools.upstreamFor(call.model, PROTOCOLS[protocol].upstream);
    if (!upstream)
      throw new ApiError(
        404,
        'model_not_found',
        `the model ${JSON.stringify(call.model)} is not served by this gateway`,
        'model',
      );
    const session: SessionRef = { tenant: principal.tenant, sessionId: sessionIdOf(request) };
    const sessionKey = `${session.tenant}/${session.sessionId}`;
    await this.withinRecordWait(this.recordsUnderWay.get(sessionKey));
    const state = await this.sessionBeforeCall(session, principal);
    if (state?.status === 'open' && !mayWrite(state, principal.subject)) {
      throw new ApiError(
        403,
        'not_a_writer',
        'this credential may not write to this session',
        undefined,
        'not_a_writer',
      );
    }
    const answerMessageId = randomUUID();
    // Placed against the state read now: a request the session cannot hold (an unknown response) is refused here.
    const planned =
      state?.status === 'open'
        ? this.plannedAnswer(call, PROTOCOLS[protocol].dialect, answerMessageId, state)
        : answerMessageId;
    const abort = new AbortController();
    response.on('close', () => abort.abort());
    const result = await this.caller.call(upstream, {
      path: PROTOCOLS[protocol].path + queryOf(request),
      headers: request.headers,
      body: request.body as Buffer,
      sessionId: session.sessionId,
      signal: abort.signal,
    });
    if (result.kind === 'aborted') return;
    if (result.kind === 'unavailable') {
      if (result.retryAfterSeconds !== undefined) void reply.header('retry-after', String(result.retryAfterSeconds));
      const message = result.status === 429 ? 'every upstream key is rate limited' : 'no upstream could answer';
      throw new ApiError(result.status, 'upstream_unavailable', message);
    }
    if (result.status < 200 || result.status >= 300) return relay(result, reply);
    if (state === undefined) return relay(result, reply);
    const recording = new AnswerRecording(
      this.sessions,
      session,
      authorOf(principal),
      PROTOCOLS[protocol].dialect,
      this.recordingObserver,
      call,
      answerMessageId,
      this.config.gateway.recordBatchMs,
    );
    this.recordsUnderWay.set(sessionKey, recording.ended);
    void recording.ended.then(() => {
      if (this.recordsUnderWay.get(sessionKey) === recording.ended) this.recordsUnderWay.delete(sessionKey);
    });
    try {
      // An answer the session refuses to record (its quota, a race it lost) is not relayed: the
      // client gets the refusal instead. Waiting for the request's record costs the stream one
      // append; only a gateway told to pass calls on when the log fails stops waiting.
      const refusal =
        this.config.gateway.onLogFailure === 'pass'
          ? await this.withinRecordWait(recording.refusal())
          : await recording.refusal();
      if (refusal) {
        result.body.destroy();
        throw refusal;
      }
      response.setHeader('x-ledger-session', session.sessionId);
      response.setHeader('x-ledger-message', planned);
      if (call.stream) return await this.stream(protocol, result, reply, recording, state);
      return await this.whole(result, reply, recording);
    } finally {
      // However the call ended, its record ends too, so the next call on the session does not wait for it.
      void recording.finish(NOT_RELAYED);
    }
  }

  /**
   * The session before the call, opened if the call is its first. A session this instance has
   * folded recently is taken as cached when its writers already admit the caller (they only grow)
   * and the log took the last record; otherwise the log is read, which is its health check too:
   * when it fails the call is refused before any upstream is asked (or, with `pass`, relayed
   * unrecorded: `undefined`).
   */
  private async sessionBeforeCall(session: SessionRef, principal: Principal): Promise<SessionState | undefined> {
    const cached = this.sessions.cached(session);
    if (this.logHealthy && cached?.status === 'open' && mayWrite(cached, principal.subject)) return cached;
    try {
      const state = await this.opened(session, principal, await this.sessions.load(session));
      this.logHealthy = true;
      return state;
    } catch (error) {
      this.logger.warn({ err: error }, 'the event log cannot take a model call');
      this.recordingFailed(error);
      if (this.config.gateway.onLogFailure === 'pass') return undefined;
      throw new ApiError(503, 'log_unavailable', 'the ledger cannot record this call now; retry later');
    }
  }

  /**
   * A session named by a header is created on its first call, before any upstream is asked: of two
   * producers racing to create it, the one that does not own it is refused before its call costs anything.
   */
  private async opened(session: SessionRef, principal: Principal, state: SessionState): Promise<SessionState> {
    if (state.status !== 'absent') return state;
    const command = {
      type: 'open_session' as const,
      sessionId: session.sessionId,
      title: null,
      metadata: { recordedBy: 'gateway' },
      owner: principal.subject,
      writers: [],
    };
    try {
      await this.sessions.execute(session, command, authorOf(principal));
    } catch (error) {
      if (!(error instanceof SessionError && error.code === 'session_exists')) throw error;
    }
    return this.sessions.load(session);
  }

  private recordingFailed(error: unknown): void {
    // A session that refuses a record says nothing of the log's health.
    if (!(error instanceof SessionError)) this.logHealthy = false;
    this.metrics.gatewayRecording.recordingFailed(error);
  }

  /**
   * The answer's message as the state read before the call places it (the record decides again when
   * it appends). A request the session has no room to record is refused here, before any upstream is asked.
   */
  private plannedAnswer(
    call: ModelCallRequest,
    dialect: DialectName,
    answerMessageId: string,
    state: Extract<SessionState, { status: 'open' }>,
  ): string {
    let placement: ReturnType<typeof placeModelCall> | undefined;
    try {
      placement = placeModelCall({ request: call, dialect, answerMessageId }, state);
    } catch (error) {
      if (error instanceof ModelCallRequestError) throw error;
    }
    // A session with no room for the call's record is refused before any upstream is asked.
    this.sessions.checkQuota(state, 'record_model_call', placement?.events);
    return placement?.answer.messageId ?? answerMessageId;
  }

  /** Bytes go to the client as they come; the events they carry go to the record beside them. */
  private stream(
    protocol: GatewayProtocol,
    result: UpstreamResponse,
    reply: FastifyReply,
    recording: AnswerRecording,
    state: SessionState,
  ): Promise<void> {
    const response = writeHead(reply, result.status, {
      ...clientResponseHeaders(result.headers),
      'x-ledger-position': String(state.status === 'open' ? state.position : 0n),
    });
    response.flushHeaders();
    const reader = new SseEventReader(SDK_READING[PROTOCOLS[protocol].upstream]);
    return new Promise<void>((resolve) => {
      let settled = false;
      const settle = (failure?: { name: string; message: string }) => {
        if (settled) return;
        settled = true;
        recording.push(reader.end(failure !== undefined));
        recording.lose(reader.unreadable);
        // The client's SDK raised the provider's error: its stream ended there, whatever came after.
        void recording.finish(reader.raised ?? failure).then(
          () => resolve(),
          () => resolve(),
        );
      };
      result.body.on('data', (bytes: Buffer) => {
        recording.push(reader.push(bytes));
        if (!response.write(bytes)) {
          result.body.pause();
          response.once('drain', () => result.body.resume());
        }
      });
      result.body.on('end', () => {
        settle();
        // The client's stream ends once its record is in the log (or given up on), so a read after it sees the answer.
        void this.bounded(recording).then(() => response.end());
      });
      result.body.on('error', () => {
        if (response.writableEnded || response.destroyed)
          return settle({ name: 'AbortError', message: 'the client disconnected before the answer ended' });
        settle({ name: 'UpstreamError', message: 'the upstream connection broke off before the answer ended' });
        response.destroy();
      });
      response.on('close', () => {
        if (!response.writableFinished)
          settle({ name: 'AbortError', message: 'the client disconnected before the answer ended' });
      });
    });
  }

  /** A whole answer: recorded first, so the response can name the position of its record. */
  private async whole(result: UpstreamResponse, reply: FastifyReply, recording: AnswerRecording): Promise<void> {
    const body = await readAll(result.body, this.config.gateway.maxResponseBytes).catch(async (error: unknown) => {
      // The client gets an error, not the answer: its message says so before the response does.
      await this.bounded(recording, NOT_RELAYED);
      throw error;
    });
    const answer = answerAsSdkReads(result.headers['content-type'], body);
    // What the client's SDK gets as text (not JSON, or JSON it cannot parse) is no answer the record can hold: a gap.
    if (answer === undefined) recording.lose(1);
    else recording.push([answer]);
    const place = await this.bounded(recording);
    writeHead(reply, result.status, {
      ...clientResponseHeaders(result.headers),
      'content-length': body.length,
      ...(place ? { 'x-ledger-position': String(place.position) } : {}),
    }).end(body);
  }

  private bounded(
    recording: AnswerRecording,
    failure?: { name: string; message: string },
  ): Promise<AnswerPlace | undefined> {
    return this.withinRecordWait(recording.finish(failure));
  }

  /** `work`'s result, or `undefined` once `LEDGER_GATEWAY_RECORD_WAIT_MS` has passed. */
  private withinRecordWait<T>(work: Promise<T> | undefined): Promise<T | undefined> {
    if (!work) return Promise.resolve(undefined);
    const waited = new Promise<undefined>((resolve) =>
      setTimeout(() => resolve(undefined), this.config.gateway.recordWaitMs).unref(),
    );
    return Promise.race([work, waited]);
  }
}

/**
 * A whole answer's body as both SDKs read it: parsed as JSON when its media type says JSON (a byte order mark
 * dropped, as `fetch` decodes it), else their caller gets text; `undefined` for text, for JSON that does not parse,
 * and for a media type not in lower case (`openai` reads it in any case, `@anthropic-ai/sdk` only in lower case).
 */
function answerAsSdkReads(contentType: string | undefined, body: Buffer): unknown {
  const mediaType = contentType?.split(';')[0].trim();
  if (mediaType !== mediaType?.toLowerCase()) return undefined;
  if (!mediaType?.includes('application/json') && !mediaType?.endsWith('+json')) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(body)) as unknown;
  } catch {
    return undefined;
  }
}

function relay(result: UpstreamResponse, reply: FastifyReply): void {
  const response = writeHead(reply, result.status, clientResponseHeaders(result.headers));
  // The body errors when the client leaves (the call is aborted): pipeline hears it, so nothing crashes.
  pipeline(result.body, response, () => undefined);
}

/** From here on the answer is written to the connection itself; until then a refusal is Fastify's to send. */
function writeHead(reply: FastifyReply, status: number, headers: OutgoingHttpHeaders): ServerResponse {
  reply.hijack();
  return reply.raw.writeHead(status, headers);
}

/** The request's query string (Anthropic's `?beta=true`), parsed: a request target is the client's to write. */
function queryOf(request: FastifyRequest): string {
  return new URL(request.url, 'http://gateway.invalid').search;
}

function jsonBody(body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0)
    throw new ApiError(400, 'invalid_request', 'the request body must be a JSON object', '(body)');
  // Forwarded as sent, so recorded as sent: bytes that are not UTF-8 would be recorded as U+FFFD.
  if (!isUtf8(body)) throw new ApiError(400, 'malformed_json', 'the request body is not UTF-8 JSON', '(body)');
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    throw new ApiError(400, 'malformed_json', 'the request body is not valid JSON', '(body)');
  }
}

/** The session the header names (created on first use), or a new one for this call alone. */
function sessionIdOf(request: FastifyRequest): string {
  const named = request.headers[SESSION_HEADER];
  if (named === undefined) return randomUUID();
  if (typeof named !== 'string' || named.length > ID_MAX_LENGTH || !ID_CHARACTERS.test(named)) {
    throw new ApiError(400, 'invalid_request', `X-Ledger-Session: ${ID_RULE}`, 'X-Ledger-Session');
  }
  return named;
}

async function readAll(body: Readable, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const part of body) {
      size += (part as Buffer).length;
      if (size > limit) {
        body.destroy();
        throw new ApiError(502, 'upstream_response_too_large', `the upstream's answer exceeds ${limit} bytes`);
      }
      parts.push(part as Buffer);
    }
  } catch (error) {
    if (error instanceof ApiError) throw error;
    // The connection broke off mid-answer (a reset, a timeout): the provider's fault, as one before its headers.
    throw new ApiError(502, 'upstream_unavailable', 'the upstream broke off its answer');
  }
  return Buffer.concat(parts);
}
