import {
  evolveBlocks,
  initialMessageBlocks,
  openTranslation,
  userMessageBlocks,
  type MessageBlocksState,
} from '../blocks/block-rules.js';
import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { loadBlockVectors } from '../testing/block-vectors.js';
import type { HistoryMessage } from './conversation.js';
import { anthropicHistory, openAiHistory, responsesHistory } from './history-builder.js';

/** An assistant message folded from chunks with the real block reducer (a translation opened after the first `after`). */
function assistantOf(chunks: readonly Record<string, unknown>[], translateAfter = chunks.length): HistoryMessage {
  const at = '2026-01-01T00:00:00.000Z';
  const numbered = parseChunks(chunks.map((chunk, index) => ({ seq: index + 1, ...chunk })));
  const fold = (state: MessageBlocksState, chunk: Chunk) => evolveBlocks(state, { chunk, recordedAt: at });
  const answered = numbered.slice(0, translateAfter).reduce(fold, initialMessageBlocks('a1'));
  const translating = openTranslation(answered, { blockId: 'a1-t', targetLanguage: 'fr' }, at);
  const state = translateAfter === chunks.length ? answered : numbered.slice(translateAfter).reduce(fold, translating);
  return { role: 'assistant', content: null, blocks: state.blocks };
}

function assistantFrom(file: string): HistoryMessage {
  return assistantOf(loadBlockVectors().find((candidate) => candidate.file === file)!.chunks);
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

  describe('MCP results as a model expects them (issue 18)', () => {
    const tool = (id: string, status: string, response?: unknown) => ({
      id,
      tool: { name: 'probe' },
      arguments: {},
      status,
      ...(response === undefined ? {} : { response }),
    });
    const png = 'iVBORw0KGgoAAAANSUhEUg==';
    const results = {
      call_text: {
        content: [
          { type: 'text', text: 'line one' },
          { type: 'text', text: 'line two' },
        ],
        isError: false,
      },
      call_image: {
        content: [
          { type: 'text', text: 'the chart' },
          { type: 'image', data: png, mimeType: 'image/png' },
        ],
        isError: false,
      },
      // A result the server marked as an error, though the call itself completed.
      call_error: { content: [{ type: 'text', text: 'no such city' }], isError: true },
    };
    const ids = Object.keys(results) as (keyof typeof results)[];
    const assistant = assistantOf(
      [
        { type: 'llm_response_created' },
        { type: 'mcp_tool_pending', responses: ids.map((id) => tool(id, 'pending')) },
        { type: 'mcp_tool_complete', responses: ids.map((id) => tool(id, 'done', results[id])) },
        { type: 'llm_response_created' },
        { type: 'text.start' },
        { type: 'text.complete', text: 'Done.' },
        { type: 'block_complete' },
        { type: 'translation.delta', text: 'Fini.' },
        { type: 'translation.complete', text: 'Fini.' },
      ],
      7,
    );
    const path = [user('Probe it'), assistant];

    it('OpenAI: text items joined, an image noted in the text a tool message is limited to; the translation left out', () => {
      expect(
        openAiHistory(path, { includeThinking: false })
          .filter((message) => message.role === 'tool')
          .map((message) => message.content),
      ).toEqual([
        'line one\nline two',
        'the chart\n[image: image/png, not sent: this format has no place for it]',
        'no such city',
      ]);
      expect(JSON.stringify(openAiHistory(path, { includeThinking: true }))).not.toContain('Fini');
    });

    it('Anthropic: images as image blocks in the tool_result, the error marked is_error', () => {
      const { messages } = anthropicHistory(path, { includeThinking: true });
      expect(messages[2]).toEqual({
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_text', content: 'line one\nline two' },
          {
            type: 'tool_result',
            tool_use_id: 'call_image',
            content: [
              { type: 'text', text: 'the chart' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
            ],
          },
          { type: 'tool_result', tool_use_id: 'call_error', content: 'no such city', is_error: true },
        ],
      });
      expect(JSON.stringify(messages)).not.toContain('Fini');
    });

    it('Responses: an image as an input_image of the function_call_output', () => {
      const { input } = responsesHistory(path, { includeThinking: true });
      const outputs = (input as { type?: string; output?: unknown }[]).filter(
        (item) => item.type === 'function_call_output',
      );
      expect(outputs.map((item) => item.output)).toEqual([
        'line one\nline two',
        [
          { type: 'input_text', text: 'the chart' },
          { type: 'input_image', image_url: `data:image/png;base64,${png}`, detail: 'auto' },
        ],
        'no such city',
      ]);
    });
  });

  describe("a user's attachments (issue 18)", () => {
    const at = '2026-01-01T00:00:00.000Z';
    const photo = {
      name: 'p.jpg',
      mimeType: 'image/jpeg',
      size: 9,
      sha256: 'c'.repeat(64),
      url: 'https://f.example/p.jpg',
    };
    const notes = {
      name: 'notes.txt',
      mimeType: 'text/plain',
      size: 5,
      sha256: 'd'.repeat(64),
      url: 'https://f.example/n',
    };
    const reference = `[attached file: notes.txt (text/plain, 5 bytes, sha256 ${'d'.repeat(64)}) https://f.example/n]`;
    const withFiles = (content: string | null): HistoryMessage => ({
      role: 'user',
      content,
      blocks: userMessageBlocks('u1', content, [photo, notes], at).blocks,
    });

    it('OpenAI: text, then the image as an image_url part and the file as a text reference', () => {
      expect(openAiHistory([withFiles('Look')], { includeThinking: false })).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Look' },
            { type: 'image_url', image_url: { url: photo.url } },
            { type: 'text', text: reference },
          ],
        },
      ]);
    });

    it('Anthropic and Responses: an image block with its URL, an input_image; no empty text for a message of files only', () => {
      expect(anthropicHistory([withFiles(null)], { includeThinking: false }).messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'url', url: photo.url } },
            { type: 'text', text: reference },
          ],
        },
      ]);
      expect(responsesHistory([withFiles('Look')], { includeThinking: false }).input).toEqual([
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'Look' },
            { type: 'input_image', image_url: photo.url, detail: 'auto' },
            { type: 'input_text', text: reference },
          ],
        },
      ]);
    });

    it('Anthropic: a user message with no content sends no empty text block', () => {
      const { messages } = anthropicHistory([user(''), user('Hello')], { includeThinking: false });
      expect(messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }]);
    });
  });
});
