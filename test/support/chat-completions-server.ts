import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-compatible Chat Completions endpoint for tests: a real HTTP server speaking the
 * protocol (`POST /v1/chat/completions`, bearer auth, OpenAI error bodies) that validates the
 * message sequence the way the real API does and answers from a script. It stands in for an LLM
 * endpoint, which cannot run here; it is never a mock of our own code.
 */
export interface ChatRequest {
  readonly model: string;
  readonly messages: readonly Record<string, any>[];
  readonly [key: string]: unknown;
}

/** What the script answers: a message, or a failure mode to test against. */
export type ScriptedReply =
  | {
      readonly content: string | null;
      readonly toolCalls?: readonly { id: string; name: string; arguments: string }[];
      readonly delayMs?: number;
    }
  | { readonly status: number; readonly message: string; readonly delayMs?: number }
  /** A 200 whose body is not a Chat Completions response. */
  | { readonly malformedBody: string; readonly delayMs?: number };

export interface ChatCompletionsServer {
  readonly baseUrl: string;
  readonly apiKey: string;
  /** Every request the server accepted or refused, in arrival order. */
  readonly requests: ChatRequest[];
  close(): Promise<void>;
}

export class SequenceError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/**
 * The sequence rules of the Chat Completions API: every `tool` message answers a tool call of
 * the assistant message right before its run of tool messages, each call is answered exactly
 * once before the conversation moves on, and an assistant message says something or calls a tool.
 */
export function validateChatMessages(messages: unknown): void {
  if (!Array.isArray(messages) || messages.length === 0)
    throw new SequenceError("'messages' must be a non-empty array", 'messages');
  let open = new Map<string, boolean>();
  messages.forEach((message: Record<string, any>, index) => {
    const param = `messages[${index}]`;
    if (!message || typeof message !== 'object' || !ROLES.has(message.role))
      throw new SequenceError(`${param}.role must be one of ${[...ROLES].join(', ')}`, `${param}.role`);
    if (message.role === 'tool') {
      if (typeof message.tool_call_id !== 'string')
        throw new SequenceError(`${param}.tool_call_id is required`, `${param}.tool_call_id`);
      if (!open.has(message.tool_call_id)) {
        throw new SequenceError(
          `Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (${message.tool_call_id})`,
          `${param}.tool_call_id`,
        );
      }
      if (open.get(message.tool_call_id))
        throw new SequenceError(
          `${param}: tool call ${message.tool_call_id} was already answered`,
          `${param}.tool_call_id`,
        );
      if (typeof message.content !== 'string')
        throw new SequenceError(`${param}.content must be a string`, `${param}.content`);
      open.set(message.tool_call_id, true);
      return;
    }
    const unanswered = [...open].filter(([, answered]) => !answered).map(([id]) => id);
    if (unanswered.length > 0) {
      throw new SequenceError(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. ` +
          `The following tool_call_ids did not have response messages: ${unanswered.join(', ')}`,
        param,
      );
    }
    open = new Map();
    if (message.role !== 'assistant') {
      if (typeof message.content !== 'string' && !Array.isArray(message.content))
        throw new SequenceError(`${param}.content must be a string or an array of parts`, `${param}.content`);
      if (Array.isArray(message.content)) checkParts(message.content, message.role === 'user', `${param}.content`);
      return;
    }
    const calls: unknown[] = message.tool_calls ?? [];
    if (!Array.isArray(calls)) throw new SequenceError(`${param}.tool_calls must be an array`, `${param}.tool_calls`);
    if (calls.length === 0 && (typeof message.content !== 'string' || message.content === '')) {
      throw new SequenceError(`${param}: an assistant message needs content or tool_calls`, `${param}.content`);
    }
    calls.forEach((call: any, callIndex) => {
      const callParam = `${param}.tool_calls[${callIndex}]`;
      if (call?.type !== 'function' || typeof call.id !== 'string')
        throw new SequenceError(`${callParam} must be a function call with an id`, callParam);
      if (!FUNCTION_NAME.test(call.function?.name ?? ''))
        throw new SequenceError(`${callParam}.function.name must match ${FUNCTION_NAME}`, `${callParam}.function.name`);
      if (typeof call.function.arguments !== 'string')
        throw new SequenceError(
          `${callParam}.function.arguments must be a JSON string`,
          `${callParam}.function.arguments`,
        );
      try {
        JSON.parse(call.function.arguments);
      } catch {
        throw new SequenceError(`${callParam}.function.arguments is not valid JSON`, `${callParam}.function.arguments`);
      }
      if (open.has(call.id))
        throw new SequenceError(`${callParam}: duplicate tool call id ${call.id}`, `${callParam}.id`);
      open.set(call.id, false);
    });
  });
  const unanswered = [...open].filter(([, answered]) => !answered).map(([id]) => id);
  if (unanswered.length > 0)
    throw new SequenceError(
      `The following tool_call_ids did not have response messages: ${unanswered.join(', ')}`,
      'messages',
    );
}

/** Content parts: non-empty text, and image_url parts (http(s) or data URLs) in user messages only. */
function checkParts(parts: readonly any[], imagesAllowed: boolean, param: string): void {
  parts.forEach((part, index) => {
    const partParam = `${param}[${index}]`;
    if (part?.type === 'text' && typeof part.text === 'string' && part.text !== '') return;
    const url = part?.image_url?.url;
    if (
      imagesAllowed &&
      part?.type === 'image_url' &&
      typeof url === 'string' &&
      /^(https?:\/\/|data:image\/)/.test(url)
    )
      return;
    throw new SequenceError(
      `${partParam} must be a non-empty text part${imagesAllowed ? ' or an image_url part' : ''}`,
      partParam,
    );
  });
}

export async function startChatCompletionsServer(
  script: (request: ChatRequest) => ScriptedReply,
  apiKey = 'test-key',
): Promise<ChatCompletionsServer> {
  const requests: ChatRequest[] = [];
  let counter = 0;
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, body: string) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    const fail = (status: number, message: string, type: string, param: string | null = null) =>
      send(status, JSON.stringify({ error: { message, type, param, code: null } }));
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
      return fail(404, `no route ${req.method} ${req.url}`, 'invalid_request_error');
    if (req.headers.authorization !== `Bearer ${apiKey}`)
      return fail(401, 'Incorrect API key provided.', 'invalid_request_error');
    let request: ChatRequest;
    try {
      request = JSON.parse(await readBody(req)) as ChatRequest;
    } catch {
      return fail(400, 'We could not parse the JSON body of your request.', 'invalid_request_error');
    }
    requests.push(request);
    if (typeof request.model !== 'string' || request.model === '')
      return fail(400, "'model' is required", 'invalid_request_error', 'model');
    if (request.stream) return fail(400, 'this test server does not stream', 'invalid_request_error', 'stream');
    try {
      validateChatMessages(request.messages);
    } catch (error) {
      if (error instanceof SequenceError) return fail(400, error.message, 'invalid_request_error', error.param);
      throw error;
    }
    const reply = script(request);
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    if (res.destroyed) return;
    if ('status' in reply)
      return fail(reply.status, reply.message, reply.status >= 500 ? 'server_error' : 'invalid_request_error');
    if ('malformedBody' in reply) return send(200, reply.malformedBody);
    counter += 1;
    const toolCalls = reply.toolCalls?.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }));
    send(
      200,
      JSON.stringify({
        id: `chatcmpl-test-${counter}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: reply.content,
              refusal: null,
              ...(toolCalls ? { tool_calls: toolCalls } : {}),
            },
            logprobs: null,
            finish_reason: toolCalls ? 'tool_calls' : 'stop',
          },
        ],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  };
  const server: Server = createServer((req, res) => void answer(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    apiKey,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
