/**
 * Provider streams written by hand from each provider's documented streaming format, as a
 * producer would forward them: OpenAI `chat.completion.chunk` objects (and `[DONE]`), Anthropic
 * Messages stream events, AI SDK UI message stream parts. Each comes with the blocks it must give
 * (in `compareBlocks` form) and the message status.
 */
/** A stream the dialect refuses (sent as one batch from seq 1), and the field the refusal must name. */
export interface RefusedStream {
  readonly name: string;
  readonly events: readonly unknown[];
  readonly field: string;
}

export interface DialectStream {
  readonly name: string;
  readonly events: readonly unknown[];
  readonly expected: { readonly blocks: readonly Record<string, unknown>[]; readonly messageStatus: string };
}

/** A Chat Completions chunk with the envelope fields the API sends on every chunk. */
function completion(delta: Record<string, unknown>, finishReason: string | null = null): Record<string, unknown> {
  return {
    id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
    object: 'chat.completion.chunk',
    created: 1741570283,
    model: 'gpt-4o-2024-08-06',
    system_fingerprint: 'fp_eb9dce56a8',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    usage: null,
  };
}

function usageChunk(promptTokens: number, completionTokens: number): Record<string, unknown> {
  return {
    id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
    object: 'chat.completion.chunk',
    created: 1741570283,
    model: 'gpt-4o-2024-08-06',
    system_fingerprint: 'fp_eb9dce56a8',
    choices: [],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

const toolDelta = (index: number, fields: Record<string, unknown>) =>
  completion({ tool_calls: [{ index, ...fields }] });

export const OPENAI_STREAMS: readonly DialectStream[] = [
  {
    name: 'text, usage after the finish (stream_options.include_usage), [DONE]',
    events: [
      completion({ role: 'assistant', content: '', refusal: null }),
      completion({ content: 'Hello' }),
      completion({ content: ', world' }),
      completion({}, 'stop'),
      usageChunk(9, 3),
      '[DONE]',
    ],
    expected: { blocks: [{ type: 'main_text', status: 'success', content: 'Hello, world' }], messageStatus: 'success' },
  },
  {
    name: 'reasoning_content, then text; usage on the finishing chunk',
    events: [
      completion({ role: 'assistant', content: null, reasoning_content: '' }),
      completion({ content: null, reasoning_content: 'Two plus two' }),
      completion({ content: null, reasoning_content: ' is four.' }),
      completion({ content: 'The answer', reasoning_content: null }),
      completion({ content: ' is 4.' }),
      { ...completion({}, 'stop'), usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } },
      '[DONE]',
    ],
    expected: {
      blocks: [
        { type: 'thinking', status: 'success', content: 'Two plus two is four.' },
        { type: 'main_text', status: 'success', content: 'The answer is 4.' },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'text, then two parallel tool calls with streamed arguments',
    events: [
      completion({ role: 'assistant', content: null }),
      completion({ content: 'Checking both.' }),
      toolDelta(0, {
        id: 'call_DdmO9pD3xa9XTPNJ32zg2hcA',
        type: 'function',
        function: { name: 'get_weather', arguments: '' },
      }),
      toolDelta(0, { function: { arguments: '{"ci' } }),
      toolDelta(0, { function: { arguments: 'ty": "Paris"}' } }),
      toolDelta(1, {
        id: 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k',
        type: 'function',
        function: { name: 'get_time', arguments: '' },
      }),
      toolDelta(1, { function: { arguments: '{"tz": "CET"}' } }),
      completion({}, 'tool_calls'),
      usageChunk(80, 41),
      '[DONE]',
    ],
    expected: {
      blocks: [
        { type: 'main_text', status: 'success', content: 'Checking both.' },
        {
          type: 'tool',
          status: 'success',
          toolId: 'call_DdmO9pD3xa9XTPNJ32zg2hcA',
          toolName: 'get_weather',
          arguments: { city: 'Paris' },
          rawStatus: 'pending',
        },
        {
          type: 'tool',
          status: 'success',
          toolId: 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k',
          toolName: 'get_time',
          arguments: { tz: 'CET' },
          rawStatus: 'pending',
        },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'an error object mid-stream',
    events: [
      completion({ role: 'assistant', content: '' }),
      completion({ content: 'Partial ans' }),
      {
        error: {
          message: 'The server had an error while processing your request.',
          type: 'server_error',
          param: null,
          code: null,
        },
      },
    ],
    expected: {
      blocks: [
        { type: 'main_text', status: 'error', content: 'Partial ans' },
        {
          type: 'error',
          status: 'success',
          error: { name: 'server_error', message: 'The server had an error while processing your request.' },
        },
      ],
      messageStatus: 'error',
    },
  },
];

const MESSAGE_START = {
  type: 'message_start',
  message: {
    id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
    type: 'message',
    role: 'assistant',
    content: [],
    model: 'claude-sonnet-4-5-20250929',
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 472, output_tokens: 2 },
  },
};
const blockStart = (index: number, contentBlock: Record<string, unknown>) => ({
  type: 'content_block_start',
  index,
  content_block: contentBlock,
});
const blockDelta = (index: number, delta: Record<string, unknown>) => ({ type: 'content_block_delta', index, delta });
const blockStop = (index: number) => ({ type: 'content_block_stop', index });
const messageDelta = (stopReason: string, outputTokens: number) => ({
  type: 'message_delta',
  delta: { stop_reason: stopReason, stop_sequence: null },
  usage: { output_tokens: outputTokens },
});
const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds';

export const ANTHROPIC_STREAMS: readonly DialectStream[] = [
  {
    name: 'text, with a ping',
    events: [
      MESSAGE_START,
      blockStart(0, { type: 'text', text: '' }),
      { type: 'ping' },
      blockDelta(0, { type: 'text_delta', text: 'Hello' }),
      blockDelta(0, { type: 'text_delta', text: '!' }),
      blockStop(0),
      messageDelta('end_turn', 15),
      { type: 'message_stop' },
    ],
    expected: { blocks: [{ type: 'main_text', status: 'success', content: 'Hello!' }], messageStatus: 'success' },
  },
  {
    name: 'extended thinking with its signature, then text',
    events: [
      MESSAGE_START,
      blockStart(0, { type: 'thinking', thinking: '', signature: '' }),
      blockDelta(0, { type: 'thinking_delta', thinking: 'I need to find the GCD of 1071 and 462' }),
      blockDelta(0, { type: 'thinking_delta', thinking: ' using the Euclidean algorithm.' }),
      blockDelta(0, { type: 'signature_delta', signature: SIGNATURE }),
      blockStop(0),
      blockStart(1, { type: 'text', text: '' }),
      blockDelta(1, { type: 'text_delta', text: 'The GCD is 21.' }),
      blockStop(1),
      messageDelta('end_turn', 120),
      { type: 'message_stop' },
    ],
    expected: {
      blocks: [
        {
          type: 'thinking',
          status: 'success',
          content: 'I need to find the GCD of 1071 and 462 using the Euclidean algorithm.',
          signature: SIGNATURE,
        },
        { type: 'main_text', status: 'success', content: 'The GCD is 21.' },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'text, then two tool_use blocks with input_json_delta',
    events: [
      MESSAGE_START,
      blockStart(0, { type: 'text', text: '' }),
      blockDelta(0, { type: 'text_delta', text: "I'll check both." }),
      blockStop(0),
      blockStart(1, { type: 'tool_use', id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather', input: {} }),
      blockDelta(1, { type: 'input_json_delta', partial_json: '' }),
      blockDelta(1, { type: 'input_json_delta', partial_json: '{"city": "Par' }),
      blockDelta(1, { type: 'input_json_delta', partial_json: 'is"}' }),
      blockStop(1),
      blockStart(2, { type: 'tool_use', id: 'toolu_02Bq8cvLJ1pXEa3g7HkYtN2s', name: 'get_time', input: {} }),
      blockDelta(2, { type: 'input_json_delta', partial_json: '{"tz": "CET"}' }),
      blockStop(2),
      messageDelta('tool_use', 89),
      { type: 'message_stop' },
    ],
    expected: {
      blocks: [
        { type: 'main_text', status: 'success', content: "I'll check both." },
        {
          type: 'tool',
          status: 'success',
          toolId: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6',
          toolName: 'get_weather',
          arguments: { city: 'Paris' },
          rawStatus: 'pending',
        },
        {
          type: 'tool',
          status: 'success',
          toolId: 'toolu_02Bq8cvLJ1pXEa3g7HkYtN2s',
          toolName: 'get_time',
          arguments: { tz: 'CET' },
          rawStatus: 'pending',
        },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'an overloaded error mid-stream',
    events: [
      MESSAGE_START,
      blockStart(0, { type: 'text', text: '' }),
      blockDelta(0, { type: 'text_delta', text: 'Partial' }),
      { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    ],
    expected: {
      blocks: [
        { type: 'main_text', status: 'error', content: 'Partial' },
        { type: 'error', status: 'success', error: { name: 'overloaded_error', message: 'Overloaded' } },
      ],
      messageStatus: 'error',
    },
  },
];

export const AI_SDK_STREAMS: readonly DialectStream[] = [
  {
    name: 'text',
    events: [
      { type: 'start', messageId: 'msg-oLxbWfB6b1zjG1Ce' },
      { type: 'start-step' },
      { type: 'text-start', id: 'txt-0' },
      { type: 'text-delta', id: 'txt-0', delta: 'Hello, ' },
      { type: 'text-delta', id: 'txt-0', delta: 'world!' },
      { type: 'text-end', id: 'txt-0' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ],
    expected: {
      blocks: [{ type: 'main_text', status: 'success', content: 'Hello, world!' }],
      messageStatus: 'success',
    },
  },
  {
    name: 'reasoning, then text',
    events: [
      { type: 'start' },
      { type: 'start-step' },
      { type: 'reasoning-start', id: 'rs_1' },
      { type: 'reasoning-delta', id: 'rs_1', delta: 'The user wants ' },
      { type: 'reasoning-delta', id: 'rs_1', delta: 'a greeting.' },
      { type: 'reasoning-end', id: 'rs_1' },
      { type: 'text-start', id: 'msg_1' },
      { type: 'text-delta', id: 'msg_1', delta: 'Hi!' },
      { type: 'text-end', id: 'msg_1' },
      { type: 'finish-step' },
      { type: 'finish' },
    ],
    expected: {
      blocks: [
        { type: 'thinking', status: 'success', content: 'The user wants a greeting.' },
        { type: 'main_text', status: 'success', content: 'Hi!' },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'a multi-step tool loop: two parallel calls with interleaved input deltas, their outputs, then text',
    events: [
      { type: 'start' },
      { type: 'start-step' },
      { type: 'tool-input-start', toolCallId: 'call_a', toolName: 'get_weather' },
      { type: 'tool-input-delta', toolCallId: 'call_a', inputTextDelta: '{"city":' },
      { type: 'tool-input-start', toolCallId: 'call_b', toolName: 'get_time' },
      { type: 'tool-input-delta', toolCallId: 'call_b', inputTextDelta: '{"tz":"CET"}' },
      { type: 'tool-input-delta', toolCallId: 'call_a', inputTextDelta: '"Paris"}' },
      { type: 'tool-input-available', toolCallId: 'call_a', toolName: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool-input-available', toolCallId: 'call_b', toolName: 'get_time', input: { tz: 'CET' } },
      { type: 'tool-output-available', toolCallId: 'call_a', output: { celsius: 18 } },
      { type: 'tool-output-error', toolCallId: 'call_b', errorText: 'time service unavailable' },
      { type: 'finish-step' },
      { type: 'start-step' },
      { type: 'text-start', id: 'txt-1' },
      { type: 'text-delta', id: 'txt-1', delta: 'It is 18°C in Paris.' },
      { type: 'text-end', id: 'txt-1' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ],
    expected: {
      blocks: [
        {
          type: 'tool',
          status: 'success',
          toolId: 'call_a',
          toolName: 'get_weather',
          arguments: { city: 'Paris' },
          response: { celsius: 18 },
          rawStatus: 'done',
        },
        {
          type: 'tool',
          status: 'error',
          toolId: 'call_b',
          toolName: 'get_time',
          arguments: { tz: 'CET' },
          response: 'time service unavailable',
          rawStatus: 'error',
        },
        { type: 'main_text', status: 'success', content: 'It is 18°C in Paris.' },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'an error part mid-stream, then the finish the SDK still writes',
    events: [
      { type: 'start' },
      { type: 'start-step' },
      { type: 'text-start', id: 'txt-0' },
      { type: 'text-delta', id: 'txt-0', delta: 'Partial' },
      { type: 'error', errorText: 'Rate limit exceeded' },
      { type: 'finish-step' },
      { type: 'finish' },
    ],
    expected: {
      blocks: [
        { type: 'main_text', status: 'error', content: 'Partial' },
        { type: 'error', status: 'success', error: { message: 'Rate limit exceeded' } },
      ],
      messageStatus: 'error',
    },
  },
];

const openAiFirst = completion({ role: 'assistant', content: '' });
const openAiToolStart = (index: unknown, id = 'call_1') =>
  completion({ tool_calls: [{ index, id, type: 'function', function: { name: 'get_weather', arguments: '' } }] });

export const OPENAI_REFUSALS: readonly RefusedStream[] = [
  { name: 'another object type', events: [{ object: 'chat.completion', choices: [] }], field: 'events[0].object' },
  { name: 'a value that is no object', events: [42], field: 'events[0]' },
  {
    name: 'a tool call index as a string',
    events: [openAiFirst, openAiToolStart('0')],
    field: 'events[1].choices[0].delta.tool_calls[0].index',
  },
  {
    name: 'content as a number',
    events: [openAiFirst, completion({ content: 7 })],
    field: 'events[1].choices[0].delta.content',
  },
  {
    name: 'text with a NUL character',
    events: [openAiFirst, completion({ content: 'a\u0000b' })],
    field: 'events[1].choices[0].delta.content',
  },
  {
    name: 'two choices (n=2)',
    events: [{ ...openAiFirst, choices: [0, 1].map((index) => ({ index, delta: {}, finish_reason: null })) }],
    field: 'events[0].choices[1]',
  },
  {
    name: 'tool call 1 before tool call 0',
    events: [openAiFirst, openAiToolStart(1)],
    field: 'events[1].choices[0].delta.tool_calls[0].index',
  },
  {
    name: 'a tool call whose first delta has no id',
    events: [
      openAiFirst,
      completion({ tool_calls: [{ index: 0, function: { name: 'get_weather', arguments: '{}' } }] }),
    ],
    field: 'events[1].choices[0].delta.tool_calls[0].id',
  },
  {
    name: 'arguments that never complete',
    events: [
      openAiFirst,
      openAiToolStart(0),
      completion({ tool_calls: [{ index: 0, function: { arguments: '{"city": "Pa' } }] }),
      completion({}, 'tool_calls'),
    ],
    field: 'events[3].choices[0].finish_reason',
  },
  {
    name: 'content after the finish',
    events: [openAiFirst, completion({}, 'stop'), completion({ content: 'more' })],
    field: 'events[2].choices[0].delta',
  },
  { name: '[DONE] before any chunk', events: ['[DONE]'], field: 'events[0]' },
  {
    name: "[DONE] while a tool call's arguments are incomplete",
    events: [
      openAiFirst,
      openAiToolStart(0),
      completion({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
      '[DONE]',
    ],
    field: 'events[3]',
  },
  {
    name: 'a chunk after [DONE]',
    events: [openAiFirst, '[DONE]', completion({ content: 'late' })],
    field: 'events[2]',
  },
  {
    name: 'an error object without a message',
    events: [openAiFirst, { error: { type: 'server_error' } }],
    field: 'events[1].error.message',
  },
];

const anthropicTextStart = { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } };
const anthropicToolStart = {
  type: 'content_block_start',
  index: 0,
  content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} },
};
const inputJson = (partial: string) => ({
  type: 'content_block_delta',
  index: 0,
  delta: { type: 'input_json_delta', partial_json: partial },
});

export const ANTHROPIC_REFUSALS: readonly RefusedStream[] = [
  {
    name: 'an unknown event type',
    events: [MESSAGE_START, { type: 'content_block_begin', index: 0 }],
    field: 'events[1].type',
  },
  {
    name: 'an index as a string',
    events: [
      MESSAGE_START,
      anthropicTextStart,
      { type: 'content_block_delta', index: '0', delta: { type: 'text_delta', text: 'a' } },
    ],
    field: 'events[2].index',
  },
  {
    name: 'a text_delta whose text is a number',
    events: [
      MESSAGE_START,
      anthropicTextStart,
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 1 } },
    ],
    field: 'events[2].delta.text',
  },
  { name: 'a content block before message_start', events: [anthropicTextStart], field: 'events[0].type' },
  {
    name: 'a delta for a block never started',
    events: [MESSAGE_START, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a' } }],
    field: 'events[1].index',
  },
  {
    name: 'a block that skips an index',
    events: [MESSAGE_START, { ...anthropicTextStart, index: 1 }],
    field: 'events[1].index',
  },
  {
    name: 'a text_delta into a tool_use block',
    events: [
      MESSAGE_START,
      anthropicToolStart,
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a' } },
    ],
    field: 'events[2].delta.type',
  },
  {
    name: 'tool input that never completes',
    events: [MESSAGE_START, anthropicToolStart, inputJson('{"city": "Pa'), { type: 'content_block_stop', index: 0 }],
    field: 'events[3].index',
  },
  {
    name: 'tool input that is no object',
    events: [MESSAGE_START, anthropicToolStart, inputJson('[1, 2]'), { type: 'content_block_stop', index: 0 }],
    field: 'events[3].index',
  },
  {
    name: 'message_stop while a block is open',
    events: [MESSAGE_START, anthropicTextStart, { type: 'message_stop' }],
    field: 'events[2].type',
  },
  {
    name: 'a content block type the dialect does not take',
    events: [
      MESSAGE_START,
      {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} },
      },
    ],
    field: 'events[1].content_block.type',
  },
  {
    name: 'an event after message_stop',
    events: [
      MESSAGE_START,
      { type: 'message_delta', delta: { stop_reason: 'end_turn' } },
      { type: 'message_stop' },
      anthropicTextStart,
    ],
    field: 'events[3].type',
  },
];

const uiStart = { type: 'start' };
const inputStart = { type: 'tool-input-start', toolCallId: 'call_1', toolName: 'get_weather' };

export const AI_SDK_REFUSALS: readonly RefusedStream[] = [
  {
    name: 'an unknown part type',
    events: [uiStart, { type: 'text-chunk', id: 't', delta: 'a' }],
    field: 'events[1].type',
  },
  {
    name: 'a delta that is no string',
    events: [uiStart, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 5 }],
    field: 'events[2].delta',
  },
  {
    name: 'a text-delta for a part not open',
    events: [uiStart, { type: 'text-delta', id: 't', delta: 'a' }],
    field: 'events[1].id',
  },
  {
    name: 'a second text part while one is open',
    events: [uiStart, { type: 'text-start', id: 't1' }, { type: 'text-start', id: 't2' }],
    field: 'events[2].id',
  },
  {
    name: 'a tool output before its input is available',
    events: [uiStart, inputStart, { type: 'tool-output-available', toolCallId: 'call_1', output: 1 }],
    field: 'events[2].toolCallId',
  },
  {
    name: 'tool input that never becomes available',
    events: [uiStart, inputStart, { type: 'finish' }],
    field: 'events[2].type',
  },
  {
    name: 'a part after finish',
    events: [uiStart, { type: 'finish' }, { type: 'text-start', id: 't' }],
    field: 'events[2].type',
  },
  { name: 'a second start', events: [uiStart, uiStart], field: 'events[1].type' },
  {
    name: 'a tool call without its name',
    events: [uiStart, { type: 'tool-input-start', toolCallId: 'call_1' }],
    field: 'events[1].toolName',
  },
];

export const DIALECT_STREAMS = {
  openai: OPENAI_STREAMS,
  anthropic: ANTHROPIC_STREAMS,
  'ai-sdk': AI_SDK_STREAMS,
} as const;
export const DIALECT_REFUSALS = {
  openai: OPENAI_REFUSALS,
  anthropic: ANTHROPIC_REFUSALS,
  'ai-sdk': AI_SDK_REFUSALS,
} as const;
