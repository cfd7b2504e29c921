import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import OpenAI from 'openai';
import type { OpenAiMessage } from '../../libs/core/src/index.js';
import { loadBlockVectors, numberedChunks } from '../../libs/core/src/testing/block-vectors.js';
import { startChatCompletionsServer, type ChatCompletionsServer } from '../support/chat-completions-server.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/** Compile-time check: the history builder's messages are the `openai` package's request messages. */
const asChatRequest = (messages: OpenAiMessage[]): ChatCompletionMessageParam[] => messages;

const toolLoop = loadBlockVectors().find((vector) => vector.file === '03-multi-round-tool-loop.json')!;
const textReply = (text: string) => [
  { seq: 1, type: 'llm_response_created' },
  { seq: 2, type: 'text.start' },
  { seq: 3, type: 'text.delta', text },
  { seq: 4, type: 'text.complete', text },
  { seq: 5, type: 'block_complete' },
];

/** The history of vector 03 (three rounds, two tool calls), written out by hand from the vector. */
const toolLoopHistory = [
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  },
  {
    role: 'tool',
    tool_call_id: 'call_w1',
    // An MCP result goes as its text (issue 18), not as the JSON of its wrapper.
    content: '{"city":"Paris","tempC":18,"sky":"light rain"}',
  },
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
  {
    role: 'tool',
    tool_call_id: 'call_t2',
    content: '2025-10-14T16:05:00+02:00',
  },
  { role: 'assistant', content: 'It is 16:05 in Paris right now, 18°C with light rain — bring an umbrella.' },
];

describe('branch trees and model history', () => {
  let ledger: LedgerUnderTest;
  let llm: ChatCompletionsServer;
  let sessionId: string;
  let position = 0;

  beforeAll(async () => {
    ledger = await startLedger();
    llm = await startChatCompletionsServer(() => ({ content: 'ok' }));
    sessionId = (await ledger.request('POST', '/v1/sessions', { title: 'branches' })).body.id;
  });
  afterAll(async () => {
    await llm?.close();
    await ledger?.close();
  });

  async function message(
    id: string,
    role: 'user' | 'assistant',
    fields: { parentId?: string | null; content?: string } = {},
  ) {
    const created = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { id, role, ...fields });
    expect(created.status).toBe(201);
    position = created.body.position;
    return created.body.parentId as string | null;
  }
  async function stream(messageId: string, chunks: readonly object[]) {
    const appended = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, chunks);
    expect(appended.status).toBe(200);
    position = appended.body.position;
  }
  async function select(parentId: string | null, childId: string) {
    const selected = await ledger.request(
      'PUT',
      parentId === null
        ? `/v1/sessions/${sessionId}/selection`
        : `/v1/sessions/${sessionId}/messages/${parentId}/selection`,
      { childId },
    );
    expect(selected).toMatchObject({ status: 200, body: { parentId, childId } });
    position = selected.body.position;
  }
  async function get(path: string) {
    const response = await ledger.request(
      'GET',
      `/v1/sessions/${sessionId}${path}${path.includes('?') ? '&' : '?'}minPosition=${position}`,
    );
    expect(response.status).toBe(200);
    return response.body;
  }
  const activePath = async () => (await get('')).messages.map((m: { id: string }) => m.id);

  it('three regenerations and two edits give the expected tree, active path and history', async () => {
    expect(await message('u1', 'user', { content: 'Weather and time in Paris?' })).toBeNull();
    expect(await message('a1', 'assistant')).toBe('u1');
    await stream('a1', numberedChunks(toolLoop));
    expect(await message('u2', 'user', { content: 'And tomorrow?' })).toBe('a1');
    expect(await message('a2', 'assistant')).toBe('u2');
    await stream('a2', textReply('Tomorrow: sunny.'));
    expect(await activePath()).toEqual(['u1', 'a1', 'u2', 'a2']);

    // Regeneration 1: a sibling of a2.
    expect(await message('a2b', 'assistant', { parentId: 'u2' })).toBe('u2');
    await stream('a2b', textReply('Tomorrow will be sunny, 21°C.'));
    expect(await activePath()).toEqual(['u1', 'a1', 'u2', 'a2b']);
    const positionAfterFirstRegeneration = position;
    const treeAfterFirstRegeneration = await get('/tree');

    // Edit 1: u2 rewritten; its descendants stay on the old branch; the next reply attaches to the new leaf.
    expect(await message('u2b', 'user', { parentId: 'a1', content: 'And the day after?' })).toBe('a1');
    expect(await activePath()).toEqual(['u1', 'a1', 'u2b']);
    expect(await message('a3', 'assistant')).toBe('u2b');
    await stream('a3', textReply('Cloudy.'));

    // Regeneration 2: of a1, the message with tool rounds.
    expect(await message('a1b', 'assistant', { parentId: 'u1' })).toBe('u1');
    await stream('a1b', textReply('I cannot look that up right now.'));
    expect(await activePath()).toEqual(['u1', 'a1b']);

    // Back to a1: its own selection (u2b) still holds. Regeneration 3: of a3.
    await select('u1', 'a1');
    expect(await activePath()).toEqual(['u1', 'a1', 'u2b', 'a3']);
    expect(await message('a3b', 'assistant', { parentId: 'u2b' })).toBe('u2b');
    await stream('a3b', textReply('Cloudy, 15°C, dry.'));

    // Edit 2: the first message, as a new top-level message.
    expect(await message('u1b', 'user', { parentId: null, content: 'Weather in Lyon?' })).toBeNull();
    expect(await activePath()).toEqual(['u1b']);
    await select(null, 'u1');

    const session = await get('');
    expect(session.messages.map((m: { id: string; siblings: object }) => [m.id, m.siblings])).toEqual([
      ['u1', { ids: ['u1', 'u1b'], index: 0, count: 2 }],
      ['a1', { ids: ['a1', 'a1b'], index: 0, count: 2 }],
      ['u2b', { ids: ['u2', 'u2b'], index: 1, count: 2 }],
      ['a3b', { ids: ['a3', 'a3b'], index: 1, count: 2 }],
    ]);

    const tree = await get('/tree');
    expect(tree).toMatchObject({ roots: ['u1', 'u1b'], selectedRoot: 'u1', activePath: ['u1', 'a1', 'u2b', 'a3b'] });
    expect(
      Object.fromEntries(
        tree.messages.map(
          (m: { id: string; parentId: string | null; children: string[]; selectedChild: string | null }) => [
            m.id,
            [m.parentId, m.children, m.selectedChild],
          ],
        ),
      ),
    ).toEqual({
      u1: [null, ['a1', 'a1b'], 'a1'],
      a1: ['u1', ['u2', 'u2b'], 'u2b'],
      u2: ['a1', ['a2', 'a2b'], 'a2b'],
      a2: ['u2', [], null],
      a2b: ['u2', [], null],
      u2b: ['a1', ['a3', 'a3b'], 'a3b'],
      a3: ['u2b', [], null],
      a1b: ['u1', [], null],
      a3b: ['u2b', [], null],
      u1b: [null, [], null],
    });

    const history = await get('/history');
    expect(history.messages).toEqual([
      { role: 'user', content: 'Weather and time in Paris?' },
      ...toolLoopHistory,
      { role: 'user', content: 'And the day after?' },
      { role: 'assistant', content: 'Cloudy, 15°C, dry.' },
    ]);
    const withThinking = await get('/history?includeThinking=true');
    expect(withThinking.messages[1]).toMatchObject({
      reasoning_content: 'I need the weather in Paris first, then the local time there.',
    });
    const anthropic = await get('/history?format=anthropic');
    expect(
      anthropic.messages.map(
        (m: { role: string; content: { type: string }[] }) =>
          `${m.role}:${m.content.map((block) => block.type).join('+')}`,
      ),
    ).toEqual([
      'user:text',
      'assistant:tool_use',
      'user:tool_result',
      'assistant:text+tool_use',
      'user:tool_result',
      'assistant:text',
      'user:text',
      'assistant:text',
    ]);

    // The read models and a fold of the log agree; ?at= gives the tree and selections as they were.
    const folded = await ledger.request('GET', `/v1/sessions/${sessionId}/tree?at=${position}`);
    expect({ ...folded.body, position: 0 }).toEqual({ ...tree, position: 0 });
    expect((await ledger.request('GET', `/v1/sessions/${sessionId}?at=${position}`)).body.messages).toEqual(
      session.messages,
    );
    const earlier = await ledger.request('GET', `/v1/sessions/${sessionId}/tree?at=${positionAfterFirstRegeneration}`);
    expect({ ...earlier.body, position: 0 }).toEqual({ ...treeAfterFirstRegeneration, position: 0 });
    expect(earlier.body.activePath).toEqual(['u1', 'a1', 'u2', 'a2b']);

    // The OpenAI-format history is a valid request for the official client and an endpoint that checks the sequence.
    const client = new OpenAI({ baseURL: llm.baseUrl, apiKey: llm.apiKey, maxRetries: 0 });
    const messages = asChatRequest(history.messages);
    const completion = await client.chat.completions.create({ model: 'test-model', messages });
    expect(completion.choices[0].message.content).toBe('ok');
    expect(llm.requests.at(-1)!.messages).toEqual(history.messages);
    // …and that endpoint does refuse an orphan call or an unanswered result.
    await expect(
      client.chat.completions.create({
        model: 'test-model',
        messages: messages.filter((m) => !(m.role === 'tool' && m.tool_call_id === 'call_t2')),
      }),
    ).rejects.toMatchObject({ status: 400 });
    await expect(
      client.chat.completions.create({ model: 'test-model', messages: messages.filter((_, index) => index !== 1) }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it('refuses a selection of a message that is not a child, and an unknown parent, naming the field', async () => {
    const notChild = await ledger.request('PUT', `/v1/sessions/${sessionId}/messages/u1/selection`, { childId: 'u2' });
    expect(notChild).toMatchObject({ status: 422, body: { error: { code: 'not_a_child', field: 'childId' } } });
    expect(
      (await ledger.request('PUT', `/v1/sessions/${sessionId}/messages/nope/selection`, { childId: 'u2' })).status,
    ).toBe(404);
    expect(
      (await ledger.request('PUT', `/v1/sessions/${sessionId}/selection`, { child: 'u1' })).body.error,
    ).toMatchObject({ code: 'invalid_request', field: 'childId' });
    expect((await ledger.request('GET', `/v1/sessions/${sessionId}/history?format=gemini`)).body.error).toMatchObject({
      field: 'format',
    });
  });
});
