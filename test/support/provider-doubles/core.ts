import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * What every provider double shares: the reply a script gives, the shape each protocol module
 * fills in, and the small helpers (chunking, signing, error type) they use. The protocol modules
 * (openai-chat.ts, openai-responses.ts, anthropic-messages.ts) only know their own wire format.
 */

export interface ToolCallReply {
  readonly id: string;
  readonly name: string;
  /** The JSON text of the arguments, streamed in pieces of `chunkChars`. */
  readonly arguments: string;
}

/** A web search the model ran before answering; its results are cited by the whole answer text. */
export interface SearchReply {
  readonly query: string;
  readonly results: readonly { readonly url: string; readonly title: string }[];
}

export interface UsageReply {
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  readonly reasoningTokens?: number;
  readonly cachedInputTokens?: number;
}

export interface Pacing {
  /** Wait before the status line and headers go out. */
  readonly firstByteDelayMs?: number;
  /** Wait between two stream events. */
  readonly chunkDelayMs?: number;
}

/** A model answer, rendered in whichever protocol the request used. */
export interface AnswerReply extends Pacing {
  readonly reasoning?: string;
  readonly text?: string;
  readonly toolCalls?: readonly ToolCallReply[];
  readonly usage?: UsageReply;
  readonly search?: SearchReply;
  /** Characters per text, reasoning or arguments delta; default 4. */
  readonly chunkChars?: number;
  /**
   * Streaming: send this many events, then the protocol's mid-stream error, then close.
   * Non-streaming: the whole call fails with a 500.
   */
  readonly failAfterChunks?: number;
  readonly errorMessage?: string;
}

export type RefusalStatus = 400 | 401 | 403 | 429 | 500 | 503;

/** A refusal with the provider's real error body; `retryAfter` (seconds) sets `Retry-After`. */
export interface RefusalReply extends Pacing {
  readonly status: RefusalStatus;
  readonly retryAfter?: number;
  readonly message?: string;
}

export type Reply = AnswerReply | RefusalReply;

export type ProtocolName = 'openai-chat' | 'openai-responses' | 'anthropic-messages';

export interface DoubleRequest {
  readonly protocol: ProtocolName;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: any;
}

/** Answers every call in its scope (one key, or any key) that no queued reply answers. */
export type ReplyScript = (request: DoubleRequest, key: string) => Reply;

export function isRefusal(reply: Reply): reply is RefusalReply {
  return 'status' in reply;
}

/** A request the real API would refuse with a 400; `param` names the offending field. */
export class InvalidRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/** One SSE event: `event: <name>` when the protocol names events, then `data: <json or literal>`. */
export interface StreamEvent {
  readonly event?: string;
  readonly data: unknown;
}

export function frame(event: StreamEvent): string {
  const data = typeof event.data === 'string' ? event.data : JSON.stringify(event.data);
  return `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${data}\n\n`;
}

/** Everything a protocol needs to render one answer deterministically. */
export interface RenderContext {
  readonly body: any;
  readonly answer: AnswerReply;
  /** `<prefix><n>` from the double's counter: the same script gives the same ids. */
  readonly nextId: (prefix: string) => string;
  /** A fixed creation time (seconds), so two runs of one script give the same bytes. */
  readonly created: number;
}

export interface Rendered {
  /** The non-streaming response body. */
  readonly body: unknown;
  /** The streaming events, in order, ending with the protocol's terminator. */
  readonly events: readonly StreamEvent[];
}

/** One provider protocol: where it lives, how it authenticates, validates, renders and refuses. */
export interface Protocol {
  readonly name: ProtocolName;
  readonly path: string;
  /** The key the request presents, or undefined when it presents none. */
  keyOf(headers: IncomingHttpHeaders): string | undefined;
  /** Throws InvalidRequest as the real API would refuse the request. */
  validate(body: any, headers: IncomingHttpHeaders): void;
  render(context: RenderContext): Rendered;
  errorBody(status: number, message: string, param?: string | null): unknown;
  /** The event a stream carries when the provider fails after `eventsSent` events. */
  streamError(message: string, eventsSent: number): StreamEvent;
  /** The response headers (besides content type) this provider sends, e.g. its request id. */
  readonly requestIdHeader: string;
}

/** Splits text into deltas of `size` characters (code points, so no surrogate pair is cut). */
export function pieces(text: string, size: number): string[] {
  const characters = [...text];
  const result: string[] = [];
  for (let start = 0; start < characters.length; start += size)
    result.push(characters.slice(start, start + size).join(''));
  return result;
}

export function chunkChars(answer: AnswerReply): number {
  return Math.max(1, answer.chunkChars ?? 4);
}

const SIGNING_SECRET = 'provider-double';

/** A deterministic signature over `parts`: issued by any double, checked by any double. */
export function sign(...parts: string[]): string {
  return createHmac('sha256', SIGNING_SECRET).update(parts.join('\u0000')).digest('base64');
}

/** Token counts: from the script, else a fixed estimate from the answer's length. */
export function usageOf(answer: AnswerReply): Required<UsageReply> {
  const estimate = (text: string) => Math.ceil(text.length / 4);
  const reasoningTokens = answer.usage?.reasoningTokens ?? estimate(answer.reasoning ?? '');
  const produced = (answer.text ?? '') + (answer.toolCalls ?? []).map((call) => call.name + call.arguments).join('');
  return {
    inputTokens: answer.usage?.inputTokens ?? 10,
    outputTokens: answer.usage?.outputTokens ?? estimate(produced) + reasoningTokens,
    reasoningTokens,
    cachedInputTokens: answer.usage?.cachedInputTokens ?? 0,
  };
}

export function defaultRefusalMessage(status: number): string {
  const messages: Record<number, string> = {
    400: 'Bad request.',
    401: 'Invalid API key.',
    403: 'This key is not allowed to use this model.',
    429: 'Rate limit reached. Please try again later.',
    500: 'The server had an error while processing your request.',
    503: 'The server is overloaded. Please try again later.',
  };
  return messages[status] ?? 'Error.';
}

export function bearerKey(headers: IncomingHttpHeaders): string | undefined {
  return /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
}

export function asArray(value: unknown): readonly any[] {
  return Array.isArray(value) ? value : [];
}
