import {
  asArray,
  bearerKey,
  chunkChars,
  InvalidRequest,
  pieces,
  sign,
  usageOf,
  type AnswerReply,
  type Protocol,
  type RenderContext,
  type StreamEvent,
} from './core.js';
import { openAiErrorBody } from './openai-errors.js';

/**
 * OpenAI Responses, `POST /v1/responses`: `event: <type>\ndata: {...}\n\n` events with sequence
 * numbers, output items in order (reasoning, web search, message, function calls), a mid-stream
 * failure as an `error` event. Reasoning items carry `encrypted_content` when the request's
 * `include` asks for it; items are kept for `item_reference` unless the request says `store: false`.
 * A function_call item this double issued after a reasoning item is refused unless that
 * reasoning item comes before it again (by reference, by id while stored, or with its encrypted content).
 */
export function openAiResponses(): Protocol {
  const memory: Memory = { stored: new Map(), reasoningOfCall: new Map(), encryptedContent: new Map() };
  return {
    name: 'openai-responses',
    path: '/v1/responses',
    requestIdHeader: 'x-request-id',
    keyOf: bearerKey,
    validate: (body) => validate(body, memory),
    render: (context) => render(context, memory),
    errorBody: openAiErrorBody,
    streamError: (message, eventsSent) => ({
      event: 'error',
      data: { type: 'error', code: 'server_error', message, param: null, sequence_number: eventsSent },
    }),
  };
}

interface Memory {
  /** Output items of stored responses, by id, for `item_reference`. */
  readonly stored: Map<string, any>;
  /** function_call item id → the reasoning item issued before it in the same response. */
  readonly reasoningOfCall: Map<string, string>;
  /** reasoning item id → the encrypted content issued for it. */
  readonly encryptedContent: Map<string, string>;
}

const REFERENCED = Symbol('referenced');

function validate(body: any, memory: Memory): void {
  if (typeof body?.model !== 'string' || body.model === '')
    throw new InvalidRequest('Missing required parameter: model.', 'model');
  if (body.previous_response_id != null) {
    throw new InvalidRequest('previous_response_id is not supported by the provider double.', 'previous_response_id');
  }
  if (typeof body.input === 'string') return;
  if (!Array.isArray(body.input))
    throw new InvalidRequest("Invalid type for 'input': expected a string or an array.", 'input');
  const reasoningSeen = new Map<string, any>();
  const callsSeen = new Set<string>();
  body.input.forEach((given: any, index: number) => {
    const param = `input[${index}]`;
    const referenced = given?.type === 'item_reference';
    const item = referenced ? memory.stored.get(given.id) : given;
    if (item === undefined) throw new InvalidRequest(`Item with id '${given.id}' not found.`, `${param}.id`);
    switch (item?.type) {
      case 'reasoning':
        if (!referenced && item.encrypted_content != null && !issuedEncryption(memory, item)) {
          throw new InvalidRequest(
            `The encrypted content for item ${item.id ?? param} could not be verified.`,
            `${param}.encrypted_content`,
          );
        }
        if (item.id !== undefined) reasoningSeen.set(item.id, referenced ? REFERENCED : item);
        return;
      case 'function_call':
        for (const field of ['call_id', 'name', 'arguments']) {
          if (typeof item[field] !== 'string')
            throw new InvalidRequest(`Missing required parameter: '${param}.${field}'.`, `${param}.${field}`);
        }
        requireReasoning(item, reasoningSeen, memory, body.store !== false);
        callsSeen.add(item.call_id);
        return;
      case 'function_call_output':
        if (!callsSeen.has(item.call_id)) {
          throw new InvalidRequest(
            `No tool call found for function call output with call_id ${item.call_id}.`,
            `${param}.call_id`,
          );
        }
        return;
      default:
        return;
    }
  });
}

function issuedEncryption(memory: Memory, item: any): boolean {
  if (item.id !== undefined) return memory.encryptedContent.get(item.id) === item.encrypted_content;
  return [...memory.encryptedContent.values()].includes(item.encrypted_content);
}

/** A call issued after a reasoning item needs that item first, in a form the API can use. */
function requireReasoning(call: any, reasoningSeen: Map<string, any>, memory: Memory, storing: boolean): void {
  const reasoningId = call.id === undefined ? undefined : memory.reasoningOfCall.get(call.id);
  if (reasoningId === undefined) return;
  const reasoning = reasoningSeen.get(reasoningId);
  const usable =
    reasoning === REFERENCED ||
    (reasoning !== undefined && reasoning.encrypted_content != null) ||
    (reasoning !== undefined && storing && memory.stored.has(reasoningId));
  if (!usable) {
    throw new InvalidRequest(
      `Item '${call.id}' of type 'function_call' was provided without its required 'reasoning' item: '${reasoningId}'.`,
      'input',
    );
  }
}

function render({ body, answer, nextId, created }: RenderContext, memory: Memory) {
  const responseId = nextId('resp_');
  const events: StreamEvent[] = [];
  const emit = (type: string, fields: Record<string, unknown>) =>
    events.push({ event: type, data: { type, ...fields, sequence_number: events.length } });
  const usage = responsesUsage(answer);
  const response = (status: string, output: unknown[], finalUsage: unknown) => ({
    id: responseId,
    object: 'response',
    created_at: created,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? 'disabled',
    usage: finalUsage,
    user: null,
    metadata: body.metadata ?? {},
  });
  emit('response.created', { response: response('in_progress', [], null) });
  emit('response.in_progress', { response: response('in_progress', [], null) });
  const output = outputItems(answer, nextId, asArray(body.include).includes('reasoning.encrypted_content'));
  output.forEach((item, outputIndex) => itemEvents(item, outputIndex, answer, emit));
  emit('response.completed', { response: response('completed', output, usage) });
  remember(output, memory, body.store !== false);
  return { body: response('completed', output, usage), events };
}

function outputItems(answer: AnswerReply, nextId: RenderContext['nextId'], includeEncrypted: boolean): any[] {
  const items: any[] = [];
  if (answer.reasoning !== undefined) {
    const id = nextId('rs_');
    const encrypted = includeEncrypted ? { encrypted_content: sign('reasoning', id, answer.reasoning) } : {};
    items.push({ id, type: 'reasoning', summary: [{ type: 'summary_text', text: answer.reasoning }], ...encrypted });
  }
  if (answer.search !== undefined) {
    const sources = answer.search.results.map((result) => ({ type: 'url', url: result.url }));
    items.push({
      id: nextId('ws_'),
      type: 'web_search_call',
      status: 'completed',
      action: { type: 'search', query: answer.search.query, sources },
    });
  }
  if (answer.text !== undefined) {
    const annotations = (answer.search?.results ?? []).map((result) => ({
      type: 'url_citation',
      url: result.url,
      title: result.title,
      start_index: 0,
      end_index: answer.text!.length,
    }));
    const content = [{ type: 'output_text', annotations, logprobs: [], text: answer.text }];
    items.push({ id: nextId('msg_'), type: 'message', status: 'completed', content, role: 'assistant' });
  }
  for (const call of answer.toolCalls ?? []) {
    items.push({
      id: nextId('fc_'),
      type: 'function_call',
      status: 'completed',
      arguments: call.arguments,
      call_id: call.id,
      name: call.name,
    });
  }
  return items;
}

type Emit = (type: string, fields: Record<string, unknown>) => void;

/** The events that stream one output item: opened empty, filled by deltas, closed complete. */
function itemEvents(item: any, outputIndex: number, answer: AnswerReply, emit: Emit): void {
  const size = chunkChars(answer);
  const at = { item_id: item.id, output_index: outputIndex };
  switch (item.type) {
    case 'reasoning': {
      const text: string = item.summary[0].text;
      emit('response.output_item.added', {
        output_index: outputIndex,
        item: { id: item.id, type: 'reasoning', summary: [] },
      });
      emit('response.reasoning_summary_part.added', {
        ...at,
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      });
      for (const delta of pieces(text, size))
        emit('response.reasoning_summary_text.delta', { ...at, summary_index: 0, delta });
      emit('response.reasoning_summary_text.done', { ...at, summary_index: 0, text });
      emit('response.reasoning_summary_part.done', { ...at, summary_index: 0, part: { type: 'summary_text', text } });
      break;
    }
    case 'web_search_call':
      emit('response.output_item.added', {
        output_index: outputIndex,
        item: { id: item.id, type: 'web_search_call', status: 'in_progress' },
      });
      for (const phase of ['in_progress', 'searching', 'completed']) emit(`response.web_search_call.${phase}`, at);
      break;
    case 'message': {
      const part = item.content[0];
      const at0 = { ...at, content_index: 0 };
      emit('response.output_item.added', {
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', content: [] },
      });
      emit('response.content_part.added', { ...at0, part: { ...part, annotations: [], text: '' } });
      for (const delta of pieces(part.text, size)) emit('response.output_text.delta', { ...at0, delta, logprobs: [] });
      part.annotations.forEach((annotation: unknown, annotationIndex: number) =>
        emit('response.output_text.annotation.added', { ...at0, annotation_index: annotationIndex, annotation }),
      );
      emit('response.output_text.done', { ...at0, text: part.text, logprobs: [] });
      emit('response.content_part.done', { ...at0, part });
      break;
    }
    case 'function_call':
      emit('response.output_item.added', {
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', arguments: '' },
      });
      for (const delta of pieces(item.arguments, size))
        emit('response.function_call_arguments.delta', { ...at, delta });
      emit('response.function_call_arguments.done', { ...at, arguments: item.arguments });
      break;
  }
  emit('response.output_item.done', { output_index: outputIndex, item });
}

function remember(output: any[], memory: Memory, store: boolean): void {
  let reasoningId: string | undefined;
  for (const item of output) {
    if (store) memory.stored.set(item.id, item);
    if (item.type === 'reasoning') {
      reasoningId = item.id;
      if (item.encrypted_content !== undefined) memory.encryptedContent.set(item.id, item.encrypted_content);
    }
    if (item.type === 'function_call' && reasoningId !== undefined) memory.reasoningOfCall.set(item.id, reasoningId);
  }
}

function responsesUsage(answer: AnswerReply) {
  const usage = usageOf(answer);
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}
