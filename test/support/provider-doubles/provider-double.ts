import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { anthropicMessages } from './anthropic-messages.js';
import {
  defaultRefusalMessage,
  frame,
  InvalidRequest,
  isRefusal,
  type AnswerReply,
  type DoubleRequest,
  type Protocol,
  type RefusalReply,
  type Reply,
  type ReplyScript,
} from './core.js';
import { openAiChat } from './openai-chat.js';
import { openAiResponses } from './openai-responses.js';

/**
 * LLM providers for tests: one real HTTP server speaking OpenAI Chat Completions
 * (`POST /v1/chat/completions`), OpenAI Responses (`POST /v1/responses`) and Anthropic Messages
 * (`POST /v1/messages`), streaming and not, validating histories as the real APIs do and
 * answering from a script. It stands in for the providers, which cannot run here.
 *
 * ```ts
 * const double = await startProviderDouble({ keys: ['key-a', 'key-b'] });
 * double.script({ text: 'Hello', toolCalls: [{ id: 'call_1', name: 'lookup', arguments: '{"q":"x"}' }] });
 * double.script([{ status: 429, retryAfter: 2 }], { key: 'key-a' }); // key-a's next call only
 * double.script((request, key) => ({ text: `you sent ${request.body.model} with ${key}` }));
 * new OpenAI({ baseURL: `${double.baseUrl}/v1`, apiKey: 'key-a' });
 * new Anthropic({ baseURL: double.baseUrl, apiKey: 'key-b' });
 * ```
 */
export interface ProviderDouble {
  /** `http://127.0.0.1:<port>`: OpenAI clients use `${baseUrl}/v1`, Anthropic clients `baseUrl`. */
  readonly baseUrl: string;
  /** Every request, refused or answered, in arrival order. */
  readonly exchanges: readonly Exchange[];
  /**
   * Queues replies (one, or an array in order) for the next calls, or installs a function that
   * answers every later call no queued reply answers. With `key`, only for calls made with that key;
   * a key's own script goes before the any-key script. A call nothing answers gets a 500 that says so.
   */
  script(replies: Reply | readonly Reply[] | ReplyScript, scope?: { readonly key?: string }): void;
  /** Forgets every queued reply and function, so one test's leftovers cannot answer the next. */
  resetScripts(): void;
  /** Resolves once every response begun so far has ended (sent in full, failed or abandoned). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface Exchange {
  readonly path: string;
  /** The key the request presented (valid or not), or undefined. */
  readonly key: string | undefined;
  readonly headers: IncomingHttpHeaders;
  /** The parsed JSON body, or undefined when it did not parse. */
  readonly body: any;
  /** The response status, 0 until the headers are sent. */
  readonly status: number;
  /** The exact bytes of the response body written so far. */
  readonly sentBytes: Buffer;
  /** True when the client went away before the response ended. */
  readonly aborted: boolean;
}

/** The fixed `created` time of every answer: 2023-11-14T22:13:20Z. */
const CREATED = 1_700_000_000;

export async function startProviderDouble(options: { readonly keys: readonly string[] }): Promise<ProviderDouble> {
  const keys = new Set(options.keys);
  const protocols: readonly Protocol[] = [openAiChat(), openAiResponses(), anthropicMessages()];
  const scripts = new ScriptBook();
  const exchanges: Exchange[] = [];
  const inFlight = new Set<Promise<void>>();
  let counter = 0;
  const nextId = (prefix: string) => `${prefix}${String(++counter).padStart(6, '0')}`;

  const server = createServer((req, res) => {
    res.sendDate = false; // no Date header: the same script gives the same response
    const handled = handle(req, res).catch((error) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
      else res.destroy();
    });
    inFlight.add(handled);
    void handled.finally(() => inFlight.delete(handled));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    const protocol = protocols.find((candidate) => candidate.path === path);
    const raw = Buffer.concat(await req.toArray()).toString('utf8');
    const key = protocol?.keyOf(req.headers);
    const exchange = recordExchange(path, key, req.headers, raw, res);
    exchanges.push(exchange);
    if (protocol === undefined || req.method !== 'POST') {
      return sendError(exchange, protocols[0], { status: 404, message: `Unknown route ${req.method} ${path}.` });
    }
    if (key === undefined || !keys.has(key)) return sendError(exchange, protocol, { status: 401 });
    if (exchange.body === undefined) {
      return sendError(exchange, protocol, {
        status: 400,
        message: 'We could not parse the JSON body of your request.',
      });
    }
    try {
      protocol.validate(exchange.body, req.headers);
    } catch (error) {
      if (!(error instanceof InvalidRequest)) throw error;
      return sendError(exchange, protocol, { status: 400, message: error.message }, error.param);
    }
    const request: DoubleRequest = { protocol: protocol.name, path, headers: req.headers, body: exchange.body };
    const reply = scripts.next(request, key);
    if (reply.firstByteDelayMs) await delay(reply.firstByteDelayMs);
    if (res.destroyed) return;
    if (isRefusal(reply)) return sendError(exchange, protocol, reply);
    return sendAnswer(res, exchange, protocol, reply);
  }

  function sendError(exchange: WritableExchange, protocol: Protocol, refusal: Refusal, param?: string | null) {
    const body = protocol.errorBody(refusal.status, refusal.message ?? defaultRefusalMessage(refusal.status), param);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      [protocol.requestIdHeader]: nextId('req_'),
    };
    if (refusal.retryAfter !== undefined) headers['retry-after'] = String(refusal.retryAfter);
    exchange.writeHead(refusal.status, headers);
    exchange.end(JSON.stringify(body));
  }

  async function sendAnswer(res: ServerResponse, exchange: WritableExchange, protocol: Protocol, answer: AnswerReply) {
    const requestId = nextId('req_');
    const rendered = protocol.render({ body: exchange.body, answer, nextId, created: CREATED });
    const failing = answer.failAfterChunks !== undefined;
    const errorMessage = answer.errorMessage ?? defaultRefusalMessage(500);
    if (exchange.body.stream !== true) {
      if (failing) return sendError(exchange, protocol, { status: 500, message: errorMessage });
      exchange.writeHead(200, { 'content-type': 'application/json', [protocol.requestIdHeader]: requestId });
      return exchange.end(JSON.stringify(rendered.body));
    }
    exchange.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      [protocol.requestIdHeader]: requestId,
    });
    const events = failing ? rendered.events.slice(0, answer.failAfterChunks) : rendered.events;
    const frames = events.map(frame);
    if (failing) frames.push(frame(protocol.streamError(errorMessage, events.length)));
    // Unpaced events leave in one tick anyway: corked, they leave in one write instead of hundreds.
    const paced = (answer.chunkDelayMs ?? 0) > 0;
    if (!paced) res.cork();
    for (const [index, text] of frames.entries()) {
      if (index > 0 && paced) await delay(answer.chunkDelayMs);
      if (res.destroyed) return;
      exchange.write(text);
    }
    if (!paced) res.uncork();
    exchange.end();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exchanges,
    script: (replies, scope) => scripts.add(replies, scope?.key),
    resetScripts: () => scripts.clear(),
    settled: async () => {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A refusal as the double sends it: a scripted one, or its own (404 for an unknown route). */
type Refusal = Omit<RefusalReply, 'status'> & { readonly status: number };

interface WritableExchange extends Exchange {
  writeHead(status: number, headers: Record<string, string>): void;
  write(text: string): void;
  end(text?: string): void;
}

/** An exchange that records what it writes; the client going away marks it aborted. */
function recordExchange(
  path: string,
  key: string | undefined,
  headers: IncomingHttpHeaders,
  raw: string,
  res: ServerResponse,
) {
  const written: Buffer[] = [];
  let status = 0;
  let aborted = false;
  res.on('close', () => {
    if (!res.writableFinished) aborted = true;
  });
  const record = (text: string | undefined) => {
    if (text === undefined || text === '') return undefined;
    const bytes = Buffer.from(text, 'utf8');
    written.push(bytes);
    return bytes;
  };
  const exchange: WritableExchange = {
    path,
    key,
    headers,
    body: parseJson(raw),
    get status() {
      return status;
    },
    get sentBytes() {
      return Buffer.concat(written);
    },
    get aborted() {
      return aborted;
    },
    writeHead: (code, responseHeaders) => {
      status = code;
      res.writeHead(code, responseHeaders);
    },
    write: (text) => {
      res.write(record(text));
    },
    end: (text) => {
      const bytes = record(text);
      if (bytes) res.end(bytes);
      else res.end();
    },
  };
  return exchange;
}

/** Queued replies and standing functions, per key and for any key. */
class ScriptBook {
  private readonly queues = new Map<string | undefined, Reply[]>();
  private readonly functions = new Map<string | undefined, ReplyScript>();

  add(replies: Reply | readonly Reply[] | ReplyScript, key: string | undefined): void {
    if (typeof replies === 'function') {
      this.functions.set(key, replies);
      return;
    }
    const queue = this.queues.get(key) ?? [];
    queue.push(...(Array.isArray(replies) ? replies : [replies as Reply]));
    this.queues.set(key, queue);
  }

  clear(): void {
    this.queues.clear();
    this.functions.clear();
  }

  next(request: DoubleRequest, key: string): Reply {
    for (const scope of [key, undefined]) {
      const queued = this.queues.get(scope)?.shift();
      if (queued) return queued;
      const standing = this.functions.get(scope);
      if (standing) return standing(request, key);
    }
    return { status: 500, message: `The provider double has no scripted reply for this ${request.protocol} call.` };
  }
}

function parseJson(raw: string): any {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
