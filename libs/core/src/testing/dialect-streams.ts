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

/** A whole (non-streaming) response and the stream that carries the same answer, one delta per part. */
export interface WholeResponse {
  readonly name: string;
  readonly whole: unknown;
  readonly stream: readonly unknown[];
}

/** What a dialect's whole responses are checked with: the responses, and a tool round they may follow. */
export interface WholeResponses {
  readonly responses: readonly WholeResponse[];
  readonly afterToolRound: readonly unknown[];
}

/**
 * A tool round, then the next call's response in the same message (the client ran the tools in
 * between): one message, its blocks in order, the round's tool calls settled when it completes.
 */
function twoRounds(toolRound: DialectStream, next: DialectStream): DialectStream {
  const settled = toolRound.expected.blocks.map((block) =>
    block.status === 'pending' ? { ...block, status: 'success' } : block,
  );
  return {
    name: `a tool round, then the next call's response in the same message (${next.name})`,
    events: [...toolRound.events, ...next.events],
    expected: { blocks: [...settled, ...next.expected.blocks], messageStatus: next.expected.messageStatus },
  };
}

/** What an error mid-text gives: the partial text fails, an error block follows, the message fails. */
function failedMidText(partial: string, error: Record<string, unknown>): DialectStream['expected'] {
  return {
    blocks: [
      { type: 'main_text', status: 'error', content: partial },
      { type: 'error', status: 'success', error },
    ],
    messageStatus: 'error',
  };
}

/** The blocks of a tool round that called get_weather and get_time, awaiting their results. */
function pendingWeatherAndTime(weatherId: string, timeId: string): Record<string, unknown>[] {
  const pending = { type: 'tool', status: 'pending', rawStatus: 'pending' };
  return [
    { ...pending, toolId: weatherId, toolName: 'get_weather', arguments: { city: 'Paris' } },
    { ...pending, toolId: timeId, toolName: 'get_time', arguments: { tz: 'CET' } },
  ];
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

/** A whole `chat.completion` (a call without `stream`). */
function chatCompletion(message: Record<string, unknown>, finishReason: string, usage: unknown) {
  return {
    id: 'chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT',
    object: 'chat.completion',
    created: 1741569952,
    model: 'gpt-4o-2024-08-06',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, logprobs: null, finish_reason: finishReason }],
    usage,
    system_fingerprint: 'fp_eb9dce56a8',
  };
}
const OPENAI_WHOLE_TEXT = chatCompletion({ content: 'Hello, world', refusal: null, annotations: [] }, 'stop', {
  prompt_tokens: 9,
  completion_tokens: 3,
  total_tokens: 12,
});
const weatherCall = { id: 'call_DdmO9pD3xa9XTPNJ32zg2hcA', type: 'function' };
const timeCall = { id: 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k', type: 'function' };
const weatherFunction = { name: 'get_weather', arguments: '{"city": "Paris"}' };
const timeFunction = { name: 'get_time', arguments: '{"tz": "CET"}' };

const OPENAI_RESPONSES: readonly DialectStream[] = [
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
    name: 'text, then two parallel tool calls with streamed arguments: a tool round, the message stays open',
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
        ...pendingWeatherAndTime('call_DdmO9pD3xa9XTPNJ32zg2hcA', 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k'),
      ],
      messageStatus: 'processing',
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
    expected: failedMidText('Partial ans', {
      name: 'server_error',
      message: 'The server had an error while processing your request.',
    }),
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
/** A text block streamed in one delta. */
const textBlock = (index: number, text: string) => [
  blockStart(index, { type: 'text', text: '' }),
  blockDelta(index, { type: 'text_delta', text }),
  blockStop(index),
];
const messageDelta = (stopReason: string, outputTokens: number) => ({
  type: 'message_delta',
  delta: { stop_reason: stopReason, stop_sequence: null },
  usage: { output_tokens: outputTokens },
});
const REDACTED = {
  type: 'redacted_thinking',
  data: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP',
};
const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds';

const ANTHROPIC_RESPONSES: readonly DialectStream[] = [
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
      ...textBlock(1, 'The GCD is 21.'),
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
    name: 'text, then two tool_use blocks with input_json_delta: a tool round, the message stays open',
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
        ...pendingWeatherAndTime('toolu_01T1x1fJ34qAmk2tNTrN7Up6', 'toolu_02Bq8cvLJ1pXEa3g7HkYtN2s'),
      ],
      messageStatus: 'processing',
    },
  },
  {
    name: "redacted thinking (kept as the block's reasoning item), then text",
    events: [
      MESSAGE_START,
      blockStart(0, REDACTED),
      blockStop(0),
      ...textBlock(1, 'Done.'),
      messageDelta('end_turn', 30),
      { type: 'message_stop' },
    ],
    expected: {
      blocks: [
        { type: 'thinking', status: 'success', content: '', reasoningItem: REDACTED },
        { type: 'main_text', status: 'success', content: 'Done.' },
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
    expected: failedMidText('Partial', { name: 'overloaded_error', message: 'Overloaded' }),
  },
];

const AI_SDK_RESPONSES: readonly DialectStream[] = [
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
    name: 'a tool the client runs: the stream finishes awaiting its output, a tool round',
    events: [
      { type: 'start', messageId: 'msg-oLxbWfB6b1zjG1Ce' },
      { type: 'start-step' },
      { type: 'tool-input-start', toolCallId: 'call_c', toolName: 'ask_location' },
      { type: 'tool-input-delta', toolCallId: 'call_c', inputTextDelta: '{}' },
      { type: 'tool-input-available', toolCallId: 'call_c', toolName: 'ask_location', input: {} },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'tool-calls' },
    ],
    expected: {
      blocks: [{ type: 'tool', status: 'pending', toolId: 'call_c', toolName: 'ask_location', rawStatus: 'pending' }],
      messageStatus: 'processing',
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
    expected: failedMidText('Partial', { message: 'Rate limit exceeded' }),
  },
];

const openAiFirst = completion({ role: 'assistant', content: '' });
const openAiToolStart = (index: unknown, id = 'call_1') =>
  completion({ tool_calls: [{ index, id, type: 'function', function: { name: 'get_weather', arguments: '' } }] });

export const OPENAI_REFUSALS: readonly RefusedStream[] = [
  { name: 'another object type', events: [{ object: 'text_completion', choices: [] }], field: 'events[0].object' },
  {
    name: 'a whole chat.completion whose content is a number',
    events: [{ object: 'chat.completion', choices: [{ index: 0, message: { content: 5 }, finish_reason: 'stop' }] }],
    field: 'events[0].choices[0].message.content',
  },
  {
    name: 'a whole chat.completion with two choices (n=2)',
    events: [
      {
        object: 'chat.completion',
        choices: [0, 1].map((index) => ({ index, message: { content: 'a' }, finish_reason: 'stop' })),
      },
    ],
    field: 'events[0].choices',
  },
  {
    name: 'a whole chat.completion after a chunk',
    events: [openAiFirst, OPENAI_WHOLE_TEXT],
    field: 'events[1].object',
  },
  {
    name: 'a whole chat.completion whose tool arguments are no JSON object',
    events: [
      {
        object: 'chat.completion',
        choices: [
          {
            index: 0,
            message: {
              content: null,
              tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '[1]' } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
      },
    ],
    field: 'events[0].choices[0].finish_reason',
  },
  {
    name: 'a new response after one that ended without tool calls',
    events: [openAiFirst, completion({}, 'stop'), usageChunk(1, 1), completion({ role: 'assistant', content: '' })],
    field: 'events[3]',
  },
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
    name: 'a whole message with a block type the dialect does not take',
    events: [{ type: 'message', content: [{ type: 'server_tool_use', id: 's', name: 'web_search', input: {} }] }],
    field: 'events[0].content[0].type',
  },
  {
    name: 'a whole message whose tool input is no object',
    events: [
      { type: 'message', content: [{ type: 'tool_use', id: 't', name: 'f', input: [1] }], stop_reason: 'tool_use' },
    ],
    field: 'events[0].content[0].input',
  },
  {
    name: 'a new message after one that stopped at end_turn',
    events: [
      MESSAGE_START,
      { type: 'message_delta', delta: { stop_reason: 'end_turn' } },
      { type: 'message_stop' },
      MESSAGE_START,
    ],
    field: 'events[3].type',
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

/** A Responses API response object as `response.created` and the end events carry it. */
function responseObject(status: string, output: readonly unknown[], usage: unknown = null): Record<string, unknown> {
  return {
    id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
    object: 'response',
    created_at: 1741476542,
    status,
    model: 'gpt-5-2025-08-07',
    output,
    parallel_tool_calls: true,
    usage,
  };
}
const responseUsage = (input: number, output: number) => ({
  input_tokens: input,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: output,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: input + output,
});
/** The stream events from `response.created` to `response.completed`, numbered as the API numbers them. */
function responseStream(items: readonly (readonly object[])[], end: object): unknown[] {
  const created = { type: 'response.created', response: responseObject('in_progress', []) };
  const inProgress = { type: 'response.in_progress', response: responseObject('in_progress', []) };
  return [created, inProgress, ...items.flat(), end].map((event, index) => ({ ...event, sequence_number: index }));
}
const completed = (output: readonly unknown[], usage = responseUsage(37, 11)) => ({
  type: 'response.completed',
  response: responseObject('completed', output, usage),
});

interface StreamedItem {
  readonly item: Record<string, unknown>;
  readonly events: readonly Record<string, unknown>[];
}

/** A message item with one output_text part streamed in `pieces`. */
function messageItem(outputIndex: number, pieces: readonly string[], annotations: readonly object[] = []) {
  const id = `msg_67ccd2bf17f0819081ff3bb2cf6508e6${outputIndex}`;
  const at = { item_id: id, output_index: outputIndex };
  const text = pieces.join('');
  const part = { type: 'output_text', text, annotations, logprobs: [] };
  const item = { id, type: 'message', status: 'completed', role: 'assistant', content: [part] };
  const partAt = { ...at, content_index: 0 };
  return {
    item,
    events: [
      {
        type: 'response.output_item.added',
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', content: [] },
      },
      { type: 'response.content_part.added', ...partAt, part: { ...part, text: '', annotations: [] } },
      ...pieces.map((delta) => ({ type: 'response.output_text.delta', ...partAt, delta, logprobs: [] })),
      ...annotations.map((annotation, index) => ({
        type: 'response.output_text.annotation.added',
        ...partAt,
        annotation_index: index,
        annotation,
      })),
      { type: 'response.output_text.done', ...partAt, text, logprobs: [] },
      { type: 'response.content_part.done', ...partAt, part },
      { type: 'response.output_item.done', output_index: outputIndex, item },
    ],
  };
}

const ENCRYPTED = 'gAAAAABoJ8Pj1tl5YQ8-kuMuWfi6r4XrAVrvqRcGYsKAtv7d4vF2rDEeTOzDnqRw1YyDnSGmN3ik1cS8f';

/** A reasoning item with its encrypted content; each summary part streamed in its pieces. */
function reasoningItem(outputIndex: number, summaries: readonly (readonly string[])[]): StreamedItem {
  const id = `rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac${outputIndex}`;
  const at = { item_id: id, output_index: outputIndex };
  const summary = summaries.map((pieces) => ({ type: 'summary_text', text: pieces.join('') }));
  const item = { id, type: 'reasoning', summary, encrypted_content: ENCRYPTED };
  return {
    item,
    events: [
      {
        type: 'response.output_item.added',
        output_index: outputIndex,
        item: { ...item, summary: [], encrypted_content: null },
      },
      ...summaries.flatMap((pieces, index) => {
        const partAt = { ...at, summary_index: index };
        const part = summary[index];
        return [
          { type: 'response.reasoning_summary_part.added', ...partAt, part: { ...part, text: '' } },
          ...pieces.map((delta) => ({ type: 'response.reasoning_summary_text.delta', ...partAt, delta })),
          { type: 'response.reasoning_summary_text.done', ...partAt, text: part.text },
          { type: 'response.reasoning_summary_part.done', ...partAt, part },
        ];
      }),
      { type: 'response.output_item.done', output_index: outputIndex, item },
    ],
  };
}

/** A function_call item whose arguments stream in `pieces`. */
function functionCallItem(outputIndex: number, callId: string, name: string, pieces: readonly string[]): StreamedItem {
  const id = `fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc${outputIndex}`;
  const at = { item_id: id, output_index: outputIndex };
  const args = pieces.join('');
  const item = { id, type: 'function_call', status: 'completed', arguments: args, call_id: callId, name };
  return {
    item,
    events: [
      {
        type: 'response.output_item.added',
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', arguments: '' },
      },
      ...pieces.map((delta) => ({ type: 'response.function_call_arguments.delta', ...at, delta })),
      { type: 'response.function_call_arguments.done', ...at, arguments: args },
      { type: 'response.output_item.done', output_index: outputIndex, item },
    ],
  };
}

const citation = {
  type: 'url_citation',
  start_index: 0,
  end_index: 25,
  url: 'https://www.example.org/paris-weather?utm_source=openai',
  title: 'Paris weather',
};
const responsesText = messageItem(0, ['Hello', ', world']);
const responsesReasoning = reasoningItem(0, [['**Finding the GCD**\n\n', 'Use Euclid.'], ['**Answering**']]);
const responsesAnswer = messageItem(1, ['The GCD ', 'is 21.']);
const responsesUnsummarized = reasoningItem(0, []);
const responsesWeather = functionCallItem(1, 'call_DdmO9pD3xa9XTPNJ32zg2hcA', 'get_weather', ['{"ci', 'ty": "Paris"}']);
const responsesTime = functionCallItem(2, 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k', 'get_time', ['{"tz": "CET"}']);
const responsesCited = messageItem(0, ['It is 18°C in Paris today.'], [citation]);

const RESPONSES_TOOL_ROUND: DialectStream = {
  name: 'a reasoning item without summary, then two parallel function calls: a tool round, the message stays open',
  events: responseStream(
    [responsesUnsummarized.events, responsesWeather.events, responsesTime.events],
    completed([responsesUnsummarized.item, responsesWeather.item, responsesTime.item]),
  ),
  expected: {
    blocks: [
      { type: 'thinking', status: 'success', content: '', reasoningItem: responsesUnsummarized.item },
      ...pendingWeatherAndTime('call_DdmO9pD3xa9XTPNJ32zg2hcA', 'call_ABe7dQfG0vwJ7Tz2jP5LpS1k'),
    ],
    messageStatus: 'processing',
  },
};

const RESPONSES_TEXT: DialectStream = {
  name: 'text',
  events: responseStream([responsesText.events], completed([responsesText.item])),
  expected: { blocks: [{ type: 'main_text', status: 'success', content: 'Hello, world' }], messageStatus: 'success' },
};

const OPENAI_RESPONSES_RESPONSES: readonly DialectStream[] = [
  RESPONSES_TEXT,
  {
    name: 'reasoning summaries with encrypted content, then text',
    events: responseStream(
      [responsesReasoning.events, responsesAnswer.events],
      completed([responsesReasoning.item, responsesAnswer.item]),
    ),
    expected: {
      blocks: [
        {
          type: 'thinking',
          status: 'success',
          content: '**Finding the GCD**\n\nUse Euclid.\n\n**Answering**',
          reasoningItem: responsesReasoning.item,
        },
        { type: 'main_text', status: 'success', content: 'The GCD is 21.' },
      ],
      messageStatus: 'success',
    },
  },
  RESPONSES_TOOL_ROUND,
  {
    name: 'text with a url citation',
    events: responseStream([responsesCited.events], completed([responsesCited.item])),
    expected: {
      blocks: [
        {
          type: 'main_text',
          status: 'success',
          content: 'It is 18°C in Paris today.',
          citationReferences: [{ citationBlockId: '@blocks[1]', citationBlockSource: 'openai' }],
        },
        { type: 'citation', status: 'success', response: { source: 'openai', results: [citation] } },
      ],
      messageStatus: 'success',
    },
  },
  {
    name: 'response.failed mid-stream',
    events: [
      ...responseStream([messageItem(0, ['Partial']).events.slice(0, 3)], {
        type: 'response.failed',
        response: {
          ...responseObject('failed', []),
          error: { code: 'server_error', message: 'The model failed to generate a response.' },
        },
      }),
    ],
    expected: failedMidText('Partial', { name: 'server_error', message: 'The model failed to generate a response.' }),
  },
  {
    name: 'an error event mid-stream',
    events: [
      ...responseStream([messageItem(0, ['Partial']).events.slice(0, 3)], {
        type: 'error',
        code: 'rate_limit_exceeded',
        message: 'Rate limit reached for gpt-5.',
        param: null,
      }),
    ],
    expected: failedMidText('Partial', { name: 'rate_limit_exceeded', message: 'Rate limit reached for gpt-5.' }),
  },
];

export const AI_SDK_STREAMS: readonly DialectStream[] = [
  ...AI_SDK_RESPONSES,
  twoRounds(AI_SDK_RESPONSES[3], AI_SDK_RESPONSES[0]),
];
export const OPENAI_STREAMS: readonly DialectStream[] = [
  ...OPENAI_RESPONSES,
  twoRounds(OPENAI_RESPONSES[2], OPENAI_RESPONSES[1]),
];
export const ANTHROPIC_STREAMS: readonly DialectStream[] = [
  ...ANTHROPIC_RESPONSES,
  twoRounds(ANTHROPIC_RESPONSES[2], ANTHROPIC_RESPONSES[1]),
];
/** A Responses tool round, then the next call's answer, for a message recorded round by round. */
export const OPENAI_RESPONSES_ROUNDS = [RESPONSES_TOOL_ROUND, RESPONSES_TEXT] as const;
export const OPENAI_RESPONSES_STREAMS: readonly DialectStream[] = [
  ...OPENAI_RESPONSES_RESPONSES,
  twoRounds(RESPONSES_TOOL_ROUND, RESPONSES_TEXT),
];

export const OPENAI_WHOLE: WholeResponses = {
  responses: [
    {
      name: 'text',
      whole: OPENAI_WHOLE_TEXT,
      stream: [
        completion({ role: 'assistant', content: '' }),
        completion({ content: 'Hello, world' }),
        completion({}, 'stop'),
        usageChunk(9, 3),
        '[DONE]',
      ],
    },
    {
      name: 'reasoning_content, then two tool calls',
      whole: chatCompletion(
        {
          content: null,
          reasoning_content: 'Paris first.',
          tool_calls: [
            { ...weatherCall, function: weatherFunction },
            { ...timeCall, function: timeFunction },
          ],
        },
        'tool_calls',
        { prompt_tokens: 80, completion_tokens: 41, total_tokens: 121 },
      ),
      stream: [
        completion({ role: 'assistant', content: null }),
        completion({ reasoning_content: 'Paris first.' }),
        toolDelta(0, { ...weatherCall, function: weatherFunction }),
        toolDelta(1, { ...timeCall, function: timeFunction }),
        completion({}, 'tool_calls'),
        usageChunk(80, 41),
        '[DONE]',
      ],
    },
  ],
  afterToolRound: OPENAI_RESPONSES[2].events,
};

/** A whole Messages `message` (a call without `stream`). */
function anthropicMessage(content: readonly unknown[], stopReason: string, outputTokens: number) {
  const { usage, ...message } = MESSAGE_START.message;
  return {
    ...message,
    content,
    stop_reason: stopReason,
    usage: { ...usage, output_tokens: outputTokens },
  };
}
const weatherUse = { type: 'tool_use', id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather' };

export const ANTHROPIC_WHOLE: WholeResponses = {
  responses: [
    {
      name: 'thinking with its signature, then text',
      whole: anthropicMessage(
        [
          { type: 'thinking', thinking: 'Euclid it is.', signature: SIGNATURE },
          { type: 'text', text: 'The GCD is 21.' },
        ],
        'end_turn',
        120,
      ),
      stream: [
        MESSAGE_START,
        blockStart(0, { type: 'thinking', thinking: '', signature: '' }),
        blockDelta(0, { type: 'thinking_delta', thinking: 'Euclid it is.' }),
        blockDelta(0, { type: 'signature_delta', signature: SIGNATURE }),
        blockStop(0),
        ...textBlock(1, 'The GCD is 21.'),
        messageDelta('end_turn', 120),
        { type: 'message_stop' },
      ],
    },
    {
      name: 'redacted thinking, then a tool_use',
      whole: anthropicMessage([REDACTED, { ...weatherUse, input: { city: 'Paris' } }], 'tool_use', 64),
      stream: [
        MESSAGE_START,
        blockStart(0, REDACTED),
        blockStop(0),
        blockStart(1, { ...weatherUse, input: {} }),
        blockDelta(1, { type: 'input_json_delta', partial_json: '{"city":"Paris"}' }),
        blockStop(1),
        messageDelta('tool_use', 64),
        { type: 'message_stop' },
      ],
    },
  ],
  afterToolRound: ANTHROPIC_RESPONSES[2].events,
};

export const OPENAI_RESPONSES_WHOLE: WholeResponses = {
  responses: [
    {
      name: 'reasoning summaries with encrypted content, then text',
      whole: responseObject('completed', [responsesReasoning.item, responsesAnswer.item], responseUsage(37, 11)),
      stream: responseStream(
        [
          reasoningItem(0, [['**Finding the GCD**\n\nUse Euclid.'], ['**Answering**']]).events,
          messageItem(1, ['The GCD is 21.']).events,
        ],
        completed([responsesReasoning.item, responsesAnswer.item]),
      ),
    },
    {
      name: 'a reasoning item without summary, then two function calls',
      whole: responseObject(
        'completed',
        [responsesUnsummarized.item, responsesWeather.item, responsesTime.item],
        responseUsage(37, 11),
      ),
      stream: responseStream(
        [
          responsesUnsummarized.events,
          functionCallItem(1, 'call_DdmO9pD3xa9XTPNJ32zg2hcA', 'get_weather', ['{"city": "Paris"}']).events,
          responsesTime.events,
        ],
        completed([responsesUnsummarized.item, responsesWeather.item, responsesTime.item]),
      ),
    },
  ],
  afterToolRound: RESPONSES_TOOL_ROUND.events,
};

const responsesCreated = { type: 'response.created', response: responseObject('in_progress', []) };
const [messageAdded, textPartAdded, firstTextDelta] = responsesText.events;
const [weatherAdded, weatherDelta] = responsesWeather.events;

export const OPENAI_RESPONSES_REFUSALS: readonly RefusedStream[] = [
  {
    name: 'an unknown event type',
    events: [responsesCreated, { type: 'response.output_item.begin', output_index: 0 }],
    field: 'events[1].type',
  },
  {
    name: 'an output_index as a string',
    events: [responsesCreated, { ...messageAdded, output_index: '0' }],
    field: 'events[1].output_index',
  },
  { name: 'an event before response.created', events: [messageAdded], field: 'events[0].type' },
  {
    name: 'a text delta for an item never added',
    events: [responsesCreated, firstTextDelta],
    field: 'events[1].output_index',
  },
  {
    name: 'an item that skips an output_index',
    events: [responsesCreated, { ...messageAdded, output_index: 1 }],
    field: 'events[1].output_index',
  },
  {
    name: 'a content part of a type a message does not take',
    events: [responsesCreated, messageAdded, { ...textPartAdded, part: { type: 'reasoning_text', text: '' } }],
    field: 'events[2].part.type',
  },
  {
    name: 'a function_call item without its call_id',
    events: [responsesCreated, { ...weatherAdded, item: { type: 'function_call', name: 'f', arguments: '' } }],
    field: 'events[1].item.call_id',
  },
  {
    name: 'function arguments that are no JSON object when the item is done',
    events: [
      responsesCreated,
      weatherAdded,
      weatherDelta,
      {
        type: 'response.output_item.done',
        output_index: 1,
        item: { ...responsesWeather.item, arguments: '{"city": "Pa' },
      },
    ].map((event, index) => (index === 0 ? event : { ...event, output_index: 0 })),
    field: 'events[3].item.arguments',
  },
  {
    name: 'a reasoning summary delta into a message item',
    events: [
      responsesCreated,
      messageAdded,
      { type: 'response.reasoning_summary_text.delta', output_index: 0, summary_index: 0, delta: 'a' },
    ],
    field: 'events[2].output_index',
  },
  {
    name: 'response.completed while an item is open',
    events: [responsesCreated, messageAdded, completed([])],
    field: 'events[2].type',
  },
  {
    name: 'a new response after one that called no function',
    events: [responsesCreated, completed([]), responsesCreated],
    field: 'events[2].type',
  },
  {
    name: 'an error event without its message',
    events: [responsesCreated, { type: 'error', code: 'x' }],
    field: 'events[1].message',
  },
  {
    name: 'a whole response still in progress',
    events: [responseObject('in_progress', [])],
    field: 'events[0].status',
  },
  {
    name: 'a whole response whose output text is a number',
    events: [responseObject('completed', [{ ...responsesText.item, content: [{ type: 'output_text', text: 1 }] }])],
    field: 'events[0].output[0].content[0].text',
  },
];

export const DIALECT_STREAMS = {
  openai: OPENAI_STREAMS,
  'openai-responses': OPENAI_RESPONSES_STREAMS,
  anthropic: ANTHROPIC_STREAMS,
  'ai-sdk': AI_SDK_STREAMS,
} as const;
export const DIALECT_REFUSALS = {
  openai: OPENAI_REFUSALS,
  'openai-responses': OPENAI_RESPONSES_REFUSALS,
  anthropic: ANTHROPIC_REFUSALS,
  'ai-sdk': AI_SDK_REFUSALS,
} as const;
