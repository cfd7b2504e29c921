import { canonicalJson, MAX_MESSAGE_BLOCKS } from '#core';
import { compareBlocks, loadBlockVectors } from '../../libs/core/src/testing/block-vectors.js';
import { pendingToolCalls } from '../../libs/core/src/testing/ignored-chunks.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { sign } from '../support/provider-doubles/core.js';
import { startProviderDouble, type ProviderDouble } from '../support/provider-doubles/index.js';

/**
 * Issue 18 over HTTP, through the real service: citations as Cherry builds them (a search tool's,
 * a provider's), a user's attachments, MCP results in the history as a model expects them (the
 * provider doubles judge the histories), and translations. Each checks the whole block list and
 * the history; each refusal leaves the session's events as they were.
 */
describe('Cherry fidelity: citations, attachments, tool results in the history, translations', () => {
  let ledger: LedgerUnderTest;
  let provider: ProviderDouble;
  beforeAll(async () => {
    ledger = await startLedger();
    provider = await startProviderDouble({ keys: ['provider-key'] });
    provider.script(() => ({ text: 'Understood.' }));
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
  });

  const post = (path: string, body: unknown) => ledger.request('POST', path, body);

  /** A session with a user question; returns its id and the question's id. */
  async function askedSession(question: string): Promise<{ sessionId: string; userId: string }> {
    const sessionId: string = (await post('/v1/sessions', { title: question })).body.id;
    const user = await post(`/v1/sessions/${sessionId}/messages`, { role: 'user', content: question });
    expect(user.status).toBe(201);
    return { sessionId, userId: user.body.id };
  }

  /** An assistant answer posted as chunks (numbered from 1); returns its id and the append's position. */
  async function answer(sessionId: string, chunks: readonly Record<string, unknown>[]) {
    const messageId: string = (await post(`/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body.id;
    const numbered = chunks.map((chunk, index) => ({ seq: index + 1, ...chunk }));
    const appended = await post(`/v1/sessions/${sessionId}/messages/${messageId}/chunks`, numbered);
    expect(appended).toMatchObject({ status: 200, body: { appended: chunks.length } });
    return { messageId, position: appended.body.position as number };
  }

  const readMessage = async (sessionId: string, messageId: string, position: number) =>
    (await ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`)).body;
  const history = async (sessionId: string, format: string, position: number, thinking = false) =>
    (
      await ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/history?format=${format}&includeThinking=${thinking}&minPosition=${position}`,
      )
    ).body;
  const eventCount = async (sessionId: string) =>
    (await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events.length as number;

  describe('citations', () => {
    const vector = (file: string) => loadBlockVectors().find((candidate) => candidate.file === file)!;

    it('tool-first: the citation right after its search tool, every later main_text citing it; the history as said', async () => {
      const search = vector('19-search-tool-cites-later-text.json');
      const { sessionId } = await askedSession('How many moons has Jupiter?');
      const { messageId, position } = await answer(sessionId, search.chunks);
      const message = await readMessage(sessionId, messageId, position);
      expect(message.status).toBe('success');
      const [actual, expected] = compareBlocks(message.blocks, search.expected.blocks);
      expect(actual).toEqual(expected);
      // References are a field of the block, not metadata; the citation names its tool's output whole.
      expect(message.blocks[3]).toMatchObject({
        citationReferences: [{ citationBlockId: message.blocks[2].id, citationBlockSource: 'websearch' }],
      });
      expect(message.blocks[3].metadata?.citationBlockId).toBeUndefined();

      const [webCall, kbCall] = (search.chunks as { type: string; responses?: { response?: unknown }[] }[]).filter(
        (chunk) => chunk.type === 'mcp_tool_complete',
      );
      const call = (id: string, name: string, query: string) => ({
        id,
        type: 'function',
        function: { name, arguments: canonicalJson({ query }) },
      });
      expect((await history(sessionId, 'openai', position)).messages).toEqual([
        { role: 'user', content: 'How many moons has Jupiter?' },
        {
          role: 'assistant',
          content: 'I will search for that.',
          tool_calls: [call('call_web', 'builtin_web_search', 'jupiter moons')],
        },
        { role: 'tool', tool_call_id: 'call_web', content: canonicalJson(webCall.responses![0].response) },
        {
          role: 'assistant',
          content: 'Jupiter has 95 known moons.',
          tool_calls: [call('call_kb', 'builtin_knowledge_search', 'europa')],
        },
        { role: 'tool', tool_call_id: 'call_kb', content: canonicalJson(kbCall.responses![0].response) },
        { role: 'assistant', content: 'Europa, one of them, hides an ocean.\n\nAsk me for more.' },
      ]);
    });

    it("provider-side: the citation after the round's text, the reference on the message's first main_text", async () => {
      const search = vector('20-provider-search-cites-first-text.json');
      const { sessionId } = await askedSession('Weather in Paris?');
      const { messageId, position } = await answer(sessionId, search.chunks);
      const message = await readMessage(sessionId, messageId, position);
      const [actual, expected] = compareBlocks(message.blocks, search.expected.blocks);
      expect(actual).toEqual(expected);
      expect(message.blocks.map((block: { type: string }) => block.type)).toEqual([
        'main_text',
        'tool',
        'main_text',
        'citation',
      ]);
      expect((await history(sessionId, 'openai', position)).messages).toEqual([
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: 'Let me look at the weather.',
          tool_calls: [
            { id: 'call_w', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_w', content: '{"city":"Paris","tempC":18}' },
        { role: 'assistant', content: 'It is 18°C in Paris, as reported today.' },
      ]);
    });
  });

  describe('user attachments', () => {
    const photo = {
      name: 'eiffel.jpg',
      mimeType: 'image/jpeg',
      size: 52_000,
      sha256: 'e'.repeat(64),
      url: 'https://files.example/eiffel.jpg',
    };
    const plan = {
      name: 'plan.pdf',
      mimeType: 'application/pdf',
      size: 1_200,
      sha256: 'f'.repeat(64),
      url: 'http://files.example/plan.pdf',
    };
    const reference = `[attached file: plan.pdf (application/pdf, 1200 bytes, sha256 ${'f'.repeat(64)}) ${plan.url}]`;

    it('become image and file blocks after the main_text block; histories send the image as a part, the file as a reference', async () => {
      const sessionId: string = (await post('/v1/sessions', { title: 'attachments' })).body.id;
      const created = await post(`/v1/sessions/${sessionId}/messages`, {
        role: 'user',
        content: 'What is this?',
        attachments: [photo, plan],
      });
      expect(created.status).toBe(201);
      const id: string = created.body.id;
      const message = await readMessage(sessionId, id, created.body.position);
      const at = message.blocks[0].createdAt as string;
      const file = (blockId: string, attached: typeof photo, type: string, ext: string) => ({
        id: blockId,
        name: attached.name,
        origin_name: attached.name,
        path: attached.url,
        size: attached.size,
        ext,
        type,
        created_at: at,
        count: 1,
        mimeType: attached.mimeType,
        sha256: attached.sha256,
        url: attached.url,
      });
      expect(message).toMatchObject({ role: 'user', status: 'success', content: 'What is this?' });
      expect(message.blocks).toEqual([
        {
          id: `${id}-text`,
          messageId: id,
          type: 'main_text',
          status: 'success',
          createdAt: at,
          content: 'What is this?',
        },
        {
          id: `${id}-file1`,
          messageId: id,
          type: 'image',
          status: 'success',
          createdAt: at,
          url: photo.url,
          file: file(`${id}-file1`, photo, 'image', '.jpg'),
        },
        {
          id: `${id}-file2`,
          messageId: id,
          type: 'file',
          status: 'success',
          createdAt: at,
          file: file(`${id}-file2`, plan, 'document', '.pdf'),
        },
      ]);

      const position = created.body.position as number;
      expect((await history(sessionId, 'openai', position)).messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: photo.url } },
            { type: 'text', text: reference },
          ],
        },
      ]);
      expect((await history(sessionId, 'anthropic', position)).messages).toEqual([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image', source: { type: 'url', url: photo.url } },
            { type: 'text', text: reference },
          ],
        },
      ]);
      expect((await history(sessionId, 'openai-responses', position)).input).toEqual([
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            { type: 'input_image', image_url: photo.url, detail: 'auto' },
            { type: 'input_text', text: reference },
          ],
        },
      ]);
    });

    it('refuses every malformed or abusive reference with a 400 naming the field, appending nothing', async () => {
      const sessionId: string = (await post('/v1/sessions', { title: 'abuse' })).body.id;
      const before = await eventCount(sessionId);
      const with_ = (changes: Record<string, unknown>) => ({
        role: 'user',
        content: 'x',
        attachments: [{ ...photo, ...changes }],
      });
      const refused: [string, unknown][] = [
        ['attachments.0.url', with_({ url: 'javascript:alert(1)' })],
        ['attachments.0.url', with_({ url: 'file:///etc/passwd' })],
        ['attachments.0.url', with_({ url: 'data:image/png;base64,AAAA' })],
        ['attachments.0.url', with_({ url: 'ftp://files.example/a.jpg' })],
        ['attachments.0.url', with_({ url: 'https://user:secret@files.example/a.jpg' })],
        ['attachments.0.url', with_({ url: ' https://files.example/a.jpg' })],
        ['attachments.0.url', with_({ url: 'https://files.example/a\n.jpg' })],
        ['attachments.0.url', with_({ url: `https://files.example/${'a'.repeat(2048)}` })],
        ['attachments.0.url', with_({ url: 'not a url' })],
        ['attachments.0.sha256', with_({ sha256: 'E'.repeat(64) })],
        ['attachments.0.sha256', with_({ sha256: 'e'.repeat(63) })],
        ['attachments.0.sha256', with_({ sha256: `${'e'.repeat(63)}g` })],
        ['attachments.0.size', with_({ size: -1 })],
        ['attachments.0.size', with_({ size: 1.5 })],
        ['attachments.0.size', with_({ size: 2 ** 40 + 1 })],
        ['attachments.0.size', with_({ size: '10' })],
        ['attachments.0.name', with_({ name: '' })],
        ['attachments.0.name', with_({ name: 'a'.repeat(256) })],
        ['attachments.0.name', with_({ name: '../../etc/passwd' })],
        ['attachments.0.name', with_({ name: 'evil\u0000.jpg' })],
        ['attachments.0.mimeType', with_({ mimeType: 'image' })],
        ['attachments.0.mimeType', with_({ mimeType: 'Image/PNG' })],
        ['attachments.0', with_({ path: '/etc/passwd' })],
        ['attachments', { role: 'user', attachments: Array.from({ length: 21 }, () => photo) }],
        ['attachments', { role: 'assistant', attachments: [photo] }],
        ['attachments', { role: 'user', attachments: photo }],
      ];
      for (const [field, body] of refused) {
        const response = await post(`/v1/sessions/${sessionId}/messages`, body);
        expect({ field, status: response.status, error: response.body.error?.field }).toEqual({
          field,
          status: 400,
          error: field,
        });
      }
      expect(await eventCount(sessionId)).toBe(before);
    });
  });

  describe('MCP results and signed thinking in the history, judged by the provider doubles', () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const tool = (id: string, name: string, status: string, response?: unknown) => ({
      id,
      tool: { name },
      arguments: { topic: id },
      status,
      ...(response === undefined ? {} : { response }),
    });
    const reasoning = (text: string) => [
      { type: 'thinking.start' },
      { type: 'thinking.delta', text },
      { type: 'thinking.complete', text, signature: sign('thinking', text) },
    ];
    const results = {
      call_text: {
        content: [
          { type: 'text', text: 'Paris: 18°C' },
          { type: 'text', text: 'light rain' },
        ],
        isError: false,
      },
      call_image: {
        content: [
          { type: 'text', text: 'radar' },
          { type: 'image', data: png, mimeType: 'image/png' },
        ],
      },
      call_error: { content: [{ type: 'text', text: 'station offline' }], isError: true },
    };
    /** Two rounds, each reasoning (signed) before its calls; the conversation waits on the model after the last results. */
    const chunks = [
      { type: 'llm_response_created' },
      ...reasoning('I need the weather first.'),
      { type: 'mcp_tool_pending', responses: [tool('call_text', 'weather', 'pending')] },
      { type: 'mcp_tool_complete', responses: [tool('call_text', 'weather', 'done', results.call_text)] },
      { type: 'llm_response_created' },
      ...reasoning('Now the radar and the station.'),
      {
        type: 'mcp_tool_pending',
        responses: [tool('call_image', 'radar', 'pending'), tool('call_error', 'station', 'pending')],
      },
      {
        type: 'mcp_tool_complete',
        responses: [
          tool('call_image', 'radar', 'done', results.call_image),
          tool('call_error', 'station', 'error', results.call_error),
        ],
      },
    ];

    /** The Anthropic double, with thinking on: it checks the Messages API's rules on what it is sent. */
    const askAnthropic = (messages: unknown) =>
      fetch(`${provider.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'provider-key', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'claude-test',
          max_tokens: 1024,
          thinking: { type: 'enabled', budget_tokens: 512 },
          messages,
        }),
      });

    it('Chat Completions accepts the history of MCP text, image and error results', async () => {
      const { sessionId } = await askedSession('Weather, radar and station for Paris?');
      const { position } = await answer(sessionId, chunks);
      const { messages } = await history(sessionId, 'openai', position);
      expect(messages.filter((message: { role: string }) => message.role === 'tool')).toEqual([
        { role: 'tool', tool_call_id: 'call_text', content: 'Paris: 18°C\nlight rain' },
        {
          role: 'tool',
          tool_call_id: 'call_image',
          content: 'radar\n[image: image/png, not sent: this format has no place for it]',
        },
        { role: 'tool', tool_call_id: 'call_error', content: 'station offline' },
      ]);
      const response = await fetch(`${provider.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer provider-key', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-test', messages }),
      });
      expect({ status: response.status, body: await response.json() }).toMatchObject({ status: 200 });
    });

    it('the Messages API rules hold for the Anthropic history: alternating roles, every tool_use answered, signed thinking first', async () => {
      const { sessionId } = await askedSession('Weather, radar and station for Paris?');
      const { position } = await answer(sessionId, chunks);
      const body = await history(sessionId, 'anthropic', position, true);
      expect(
        body.messages.map((message: { role: string; content: { type: string }[] }) => [
          message.role,
          message.content.map((block) => block.type),
        ]),
      ).toEqual([
        ['user', ['text']],
        ['assistant', ['thinking', 'tool_use']],
        ['user', ['tool_result']],
        ['assistant', ['thinking', 'tool_use', 'tool_use']],
        ['user', ['tool_result', 'tool_result']],
      ]);
      expect(body.messages[4].content).toEqual([
        {
          type: 'tool_result',
          tool_use_id: 'call_image',
          content: [
            { type: 'text', text: 'radar' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
          ],
        },
        { type: 'tool_result', tool_use_id: 'call_error', content: 'station offline', is_error: true },
      ]);
      const response = await askAnthropic(body.messages);
      expect({ status: response.status, body: await response.json() }).toMatchObject({ status: 200 });
      // The double's rules bite: the same history without its signed thinking is refused.
      const unsigned = body.messages.map((message: { content: { type: string }[] }) => ({
        ...message,
        content: message.content.filter((block) => block.type !== 'thinking'),
      }));
      const refused = await askAnthropic(unsigned);
      expect(refused.status).toBe(400);
    });
  });

  describe('translations', () => {
    const reply = [
      { type: 'llm_response_created' },
      { type: 'text.start' },
      { type: 'text.delta', text: 'Good' },
      { type: 'text.complete', text: 'Good morning.' },
      { type: 'block_complete' },
    ];

    it('open a translation block after the ended message; its chunks fill it; the history never holds it', async () => {
      const { sessionId } = await askedSession('Greet me');
      const { messageId, position } = await answer(sessionId, reply);
      const before = await readMessage(sessionId, messageId, position);
      const historyBefore = await history(sessionId, 'openai', position);
      const textId: string = before.blocks[0].id;

      const opened = await post(`/v1/sessions/${sessionId}/messages/${messageId}/translations`, {
        targetLanguage: 'fr',
        sourceLanguage: 'en',
        sourceBlockId: textId,
      });
      expect(opened).toMatchObject({ status: 201, body: { messageId, nextSeq: reply.length + 1 } });
      const translationId: string = opened.body.id;
      const streamed = await post(`/v1/sessions/${sessionId}/messages/${messageId}/chunks`, [
        { seq: opened.body.nextSeq, type: 'translation.delta', text: 'Bon' },
        { seq: opened.body.nextSeq + 1, type: 'translation.delta', text: 'Bonjour.' },
        { seq: opened.body.nextSeq + 2, type: 'translation.complete', text: 'Bonjour.' },
      ]);
      expect(streamed).toMatchObject({ status: 200, body: { appended: 3 } });

      const after = await readMessage(sessionId, messageId, streamed.body.position);
      expect(after.status).toBe('success');
      expect(after.blocks).toEqual([
        before.blocks[0],
        {
          id: translationId,
          messageId,
          type: 'translation',
          status: 'success',
          content: 'Bonjour.',
          targetLanguage: 'fr',
          sourceLanguage: 'en',
          sourceBlockId: textId,
          createdAt: expect.any(String),
          updatedAt: expect.any(String),
        },
      ]);
      expect(await history(sessionId, 'openai', streamed.body.position)).toEqual({
        ...historyBefore,
        position: streamed.body.position,
      });
      // The projected read model and a fold of the log agree.
      const folded = await ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/messages/${messageId}?at=${streamed.body.position}`,
      );
      expect(folded.body.blocks).toEqual(after.blocks);
    });

    it('refuses a translation on a message holding the most blocks a message may, appending nothing', async () => {
      const { sessionId } = await askedSession('Read every file');
      const responses = pendingToolCalls(MAX_MESSAGE_BLOCKS + 1);
      const { messageId, position } = await answer(sessionId, [{ type: 'mcp_tool_pending', responses }]);
      const blocks = (await readMessage(sessionId, messageId, position)).blocks as { toolId: string }[];
      expect(blocks).toHaveLength(MAX_MESSAGE_BLOCKS);
      expect(blocks.at(-1)?.toolId).toBe(`call-${MAX_MESSAGE_BLOCKS - 1}`);
      const before = await eventCount(sessionId);
      const refused = await post(`/v1/sessions/${sessionId}/messages/${messageId}/translations`, {
        targetLanguage: 'fr',
      });
      expect(refused).toMatchObject({ status: 409, body: { error: { code: 'message_full', field: 'mid' } } });
      expect(await eventCount(sessionId)).toBe(before);
    });

    it('refuses an unknown message, a user message, an unknown source block and a bad language tag, appending nothing', async () => {
      const { sessionId, userId } = await askedSession('Greet me');
      const { messageId } = await answer(sessionId, reply);
      const before = await eventCount(sessionId);
      const translations = (id: string) => `/v1/sessions/${sessionId}/messages/${id}/translations`;
      const refusals: [string, unknown, number, string, string?][] = [
        [translations('nope'), { targetLanguage: 'fr' }, 404, 'message_not_found'],
        [translations(userId), { targetLanguage: 'fr' }, 422, 'not_assistant'],
        [
          translations(messageId),
          { targetLanguage: 'fr', sourceBlockId: 'nope' },
          422,
          'block_not_found',
          'sourceBlockId',
        ],
        [translations(messageId), { targetLanguage: 'français!' }, 400, 'invalid_request', 'targetLanguage'],
        [translations(messageId), { targetLanguage: 'x' }, 400, 'invalid_request', 'targetLanguage'],
        [translations(messageId), { targetLanguage: 'en-' }, 400, 'invalid_request', 'targetLanguage'],
        [translations(messageId), { targetLanguage: 42 }, 400, 'invalid_request', 'targetLanguage'],
        [translations(messageId), {}, 400, 'invalid_request', 'targetLanguage'],
        [
          translations(messageId),
          { targetLanguage: 'fr', sourceLanguage: 'en_US' },
          400,
          'invalid_request',
          'sourceLanguage',
        ],
        [translations(messageId), { targetLanguage: 'fr', engine: 'x' }, 400, 'invalid_request', 'engine'],
      ];
      for (const [path, body, status, code, field] of refusals) {
        const response = await post(path, body);
        expect({ path, body, status: response.status, error: response.body.error }).toMatchObject({
          path,
          body,
          status,
          error: { code, ...(field ? { field } : {}) },
        });
      }
      expect(await eventCount(sessionId)).toBe(before);
      const missing = await post(`/v1/sessions/no-such-session/messages/${messageId}/translations`, {
        targetLanguage: 'fr',
      });
      expect(missing.status).toBe(404);
    });
  });
});
