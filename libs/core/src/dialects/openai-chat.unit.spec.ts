import { describeDialect } from '../testing/dialect-suite.js';
import { OPENAI_STREAMS } from '../testing/dialect-streams.js';
import { openAiChatTranslator } from './openai-chat.js';

const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
  object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finishReason }],
});
const first = chunk({ role: 'assistant', content: '' });
const toolStart = (index: unknown, id = 'call_1') => chunk({ tool_calls: [{ index, id, type: 'function', function: { name: 'get_weather', arguments: '' } }] });

describeDialect('openai', OPENAI_STREAMS, [
  { name: 'another object type', events: [{ object: 'chat.completion', choices: [] }], field: 'events[0].object' },
  { name: 'a value that is no object', events: [42], field: 'events[0]' },
  { name: 'a tool call index as a string', events: [first, toolStart('0')], field: 'events[1].choices[0].delta.tool_calls[0].index' },
  { name: 'content as a number', events: [first, chunk({ content: 7 })], field: 'events[1].choices[0].delta.content' },
  { name: 'text with a NUL character', events: [first, chunk({ content: 'a\u0000b' })], field: 'events[1].choices[0].delta.content' },
  { name: 'two choices (n=2)', events: [{ ...first, choices: [first.choices[0], { ...first.choices[0], index: 1 }] }], field: 'events[0].choices[1]' },
  { name: 'tool call 1 before tool call 0', events: [first, toolStart(1)], field: 'events[1].choices[0].delta.tool_calls[0].index' },
  {
    name: 'a tool call whose first delta has no id',
    events: [first, chunk({ tool_calls: [{ index: 0, function: { name: 'get_weather', arguments: '{}' } }] })],
    field: 'events[1].choices[0].delta.tool_calls[0].id',
  },
  {
    name: 'arguments that never complete',
    events: [first, toolStart(0), chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": "Pa' } }] }), chunk({}, 'tool_calls')],
    field: 'events[3].choices[0].finish_reason',
  },
  { name: 'content after the finish', events: [first, chunk({}, 'stop'), chunk({ content: 'more' })], field: 'events[2].choices[0].delta' },
  { name: '[DONE] before any chunk', events: ['[DONE]'], field: 'events[0]' },
  { name: 'a chunk after [DONE]', events: [first, '[DONE]', chunk({ content: 'late' })], field: 'events[2]' },
  { name: 'an error object without a message', events: [first, { error: { type: 'server_error' } }], field: 'events[1].error.message' },
]);

describe('openai translator', () => {
  it('carries the accumulated text in every text.delta (a snapshot, not an increment)', () => {
    let state = openAiChatTranslator.initial;
    const deltas = ['Hel', 'lo', ', world'].map((piece) => {
      const step = openAiChatTranslator.translate(state, chunk({ content: piece }));
      state = step.state;
      return step.chunks.filter((made) => made.type === 'text.delta');
    });
    expect(deltas.flat()).toEqual([
      { type: 'text.delta', text: 'Hel' },
      { type: 'text.delta', text: 'Hello' },
      { type: 'text.delta', text: 'Hello, world' },
    ]);
  });
});
