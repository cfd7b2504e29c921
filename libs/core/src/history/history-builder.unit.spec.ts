import { evolveBlocks, initialMessageBlocks } from '../blocks/block-rules.js';
import { parseChunks } from '../chunks/chunk-schemas.js';
import { loadBlockVectors, numberedChunks } from '../testing/block-vectors.js';
import type { HistoryMessage } from './conversation.js';
import { anthropicHistory, openAiHistory } from './history-builder.js';

/** An assistant message folded from a vector's chunks with the real block reducer. */
function assistantFrom(file: string): HistoryMessage {
  const vector = loadBlockVectors().find((candidate) => candidate.file === file)!;
  const state = parseChunks(numberedChunks(vector)).reduce(
    (blocks, chunk) => evolveBlocks(blocks, { chunk, recordedAt: '2026-01-01T00:00:00.000Z' }),
    initialMessageBlocks('a1'),
  );
  return { role: 'assistant', content: null, blocks: state.blocks };
}

const user = (content: string): HistoryMessage => ({ role: 'user', content, blocks: [] });
// An MCP result goes to the model as what it says: its text, not the JSON of its wrapper.
const weather = '{"city":"Paris","tempC":18,"sky":"light rain"}';
const time = '2025-10-14T16:05:00+02:00';

describe('history builder', () => {
  it('OpenAI: per round one assistant message with its text and tool calls, then one tool message per result; thinking left out', () => {
    expect(
      openAiHistory(
        [
          { role: 'system', content: 'Be brief.', blocks: [] },
          user('Weather and time in Paris?'),
          assistantFrom('03-multi-round-tool-loop.json'),
        ],
        { includeThinking: false },
      ),
    ).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather and time in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_w1', content: weather },
      {
        role: 'assistant',
        content: 'Paris is 18°C with light rain. Let me also check the local time.',
        tool_calls: [
          {
            id: 'call_t2',
            type: 'function',
            function: { name: 'get_local_time', arguments: '{"timezone":"Europe/Paris"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_t2', content: time },
      { role: 'assistant', content: 'It is 16:05 in Paris right now, 18°C with light rain — bring an umbrella.' },
    ]);
  });

  it('OpenAI with thinking: the round that reasoned carries it as reasoning_content', () => {
    const [first] = openAiHistory([assistantFrom('03-multi-round-tool-loop.json')], { includeThinking: true });
    expect(first).toMatchObject({
      role: 'assistant',
      reasoning_content: 'I need the weather in Paris first, then the local time there.',
    });
  });

  it('every call gets an answer: a failed tool as its error result, a call that never finished as an error saying so', () => {
    const failed = openAiHistory([assistantFrom('05-tool-error.json')], { includeThinking: false });
    expect(failed.filter((message) => message.role === 'tool')).toEqual([
      {
        role: 'tool',
        tool_call_id: 'call_f1',
        content: "Error: ENOENT: no such file or directory, open '/home/me/notes/todo.md'",
      },
    ]);
    const parallel = openAiHistory([assistantFrom('11-parallel-tools-call-order.json')], { includeThinking: false });
    expect(parallel.map((message) => (message.role === 'tool' ? message.tool_call_id : message.role))).toEqual([
      'assistant',
      'call_1',
      'call_2',
    ]);
    const aborted = openAiHistory([assistantFrom('13-abort-pauses.json')], { includeThinking: true });
    expect(aborted).toEqual([
      {
        role: 'assistant',
        content: 'Partial answer',
        tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'slow', arguments: expect.any(String) } }],
      },
      {
        role: 'tool',
        tool_call_id: 'call_x',
        content: JSON.stringify({ error: 'the tool call did not complete (status: cancelled)' }),
      },
    ]);
  });

  it('a message created with whole content and no chunks is one round of text; one with nothing to say is left out', () => {
    expect(
      openAiHistory(
        [
          user('hi'),
          { role: 'assistant', content: 'Hello!', blocks: [] },
          { role: 'assistant', content: null, blocks: [] },
        ],
        { includeThinking: false },
      ),
    ).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello!' },
    ]);
  });

  it('Anthropic: content blocks, tool results in the next user turn, turns of one role merged, system on top', () => {
    const history = anthropicHistory(
      [
        { role: 'system', content: 'Be brief.', blocks: [] },
        user('Weather and time in Paris?'),
        assistantFrom('03-multi-round-tool-loop.json'),
        user('Thanks'),
      ],
      { includeThinking: true },
    );
    expect(history.system).toBe('Be brief.');
    expect(history.messages.map((message) => [message.role, message.content.map((block) => block.type)])).toEqual([
      ['user', ['text']],
      ['assistant', ['thinking', 'tool_use']],
      ['user', ['tool_result']],
      ['assistant', ['text', 'tool_use']],
      ['user', ['tool_result']],
      ['assistant', ['text']],
      ['user', ['text']],
    ]);
    expect(history.messages[1].content[1]).toEqual({
      type: 'tool_use',
      id: 'call_w1',
      name: 'get_weather',
      input: { city: 'Paris' },
    });
    expect(history.messages[2].content[0]).toEqual({ type: 'tool_result', tool_use_id: 'call_w1', content: weather });
    const failed = anthropicHistory([assistantFrom('05-tool-error.json')], { includeThinking: false });
    expect(failed.messages[1].content[0]).toMatchObject({
      type: 'tool_result',
      tool_use_id: 'call_f1',
      is_error: true,
    });
  });
});
