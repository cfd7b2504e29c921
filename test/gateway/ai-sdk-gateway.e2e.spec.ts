import { randomUUID } from 'node:crypto';
import { createOpenAI } from '@ai-sdk/openai';
import { stepCountIs, streamText, tool, type LanguageModel } from 'ai';
import { z } from 'zod';
import { capturingFetch, gatewayForSuite } from '../support/gateway-fixture.js';
import { canonicalChat, canonicalResponses, expectHistory } from '../support/gateway-history.js';

/**
 * The AI SDK (`ai` streamText with `@ai-sdk/openai`) through the gateway, against the provider
 * double: a multi-step tool loop, as stateless calls that each resend the whole conversation, is
 * received byte for byte and recorded as ONE user message and ONE assistant message holding every
 * round, and the session's history is the last request the double received plus the final answer.
 */
const weather = [
  { id: 'call_paris', name: 'weather', arguments: '{"city": "Paris"}' },
  { id: 'call_rome', name: 'weather', arguments: '{"city": "Rome"}' },
];

describe('gateway: AI SDK streamText tool loop', () => {
  const gateway = gatewayForSuite();

  /** What each response through the provider carried, byte for byte. */
  let received: Buffer[] = [];
  beforeEach(() => {
    received = [];
  });

  async function provider(sessionId: string) {
    const apiKey = await gateway().ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    return createOpenAI({
      baseURL: `${gateway().ledger.baseUrl}/gateway/openai/v1`,
      apiKey,
      headers: { 'X-Ledger-Session': sessionId },
      fetch: capturingFetch(received),
    });
  }

  /** Runs the loop to its final answer; returns the requests the double answered during it. */
  async function toolLoop(model: LanguageModel, providerOptions = {}) {
    const exchangesBefore = gateway().double.exchanges.length;
    const result = streamText({
      model,
      prompt: 'Weather in Paris and Rome?',
      tools: {
        weather: tool({
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => ({ city, sky: city === 'Paris' ? 'rainy' : 'sunny' }),
        }),
      },
      stopWhen: stepCountIs(3),
      providerOptions,
      maxRetries: 0,
    });
    expect(await result.text).toBe('Rainy in Paris, sunny in Rome.');
    expect((await result.steps).map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    const exchanges = gateway().double.exchanges.slice(exchangesBefore);
    expect(exchanges.map((exchange) => exchange.status)).toEqual([200, 200]);
    expect(received).toEqual(exchanges.map((exchange) => exchange.sentBytes));
    return exchanges;
  }

  /** The loop's calls made one user message and one assistant message, its tool calls on it. */
  async function expectOneUserOneAssistant(sessionId: string) {
    const session = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}`);
    const tree = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    expect(tree.body.messages.map((message: { role: string }) => message.role)).toEqual(['user', 'assistant']);
    const [, assistant] = session.body.messages as { status: string; blocks: { type: string; toolId?: string }[] }[];
    expect(assistant.status).toBe('success');
    const tools = assistant.blocks.filter((block) => block.type === 'tool').map((block) => block.toolId);
    expect(tools).toEqual(weather.map((call) => call.id));
  }

  it.each([
    [
      'reasoning kept client-side (store: false, encrypted content)',
      { store: false, include: ['reasoning.encrypted_content'] },
    ],
    ['reasoning stored by the provider, sent back by item_reference', {}],
  ])('Responses (the default model), %s: every round on one assistant message', async (_case, options) => {
    const sessionId = `ai-sdk-${randomUUID()}`;
    gateway().double.script([
      { reasoning: 'Two lookups.', toolCalls: weather, chunkChars: 3 },
      { reasoning: 'Both known.', text: 'Rainy in Paris, sunny in Rome.' },
    ]);
    const openai = await provider(sessionId);
    const exchanges = await toolLoop(openai('o-double'), { openai: options });
    // An item_reference stands for the output item of that id the provider issued; the history holds the item.
    const issued = new Map(
      exchanges.flatMap((exchange) => completedResponse(exchange.sentBytes).output.map((item) => [item.id, item])),
    );
    const dereferenced = (item: { type?: string; id?: string }) =>
      item.type === 'item_reference' ? issued.get(item.id!) : item;
    const last = exchanges.at(-1)!;
    await expectHistory(gateway().ledger, sessionId, 'openai-responses', canonicalResponses, {
      instructions: last.body.instructions,
      input: [...last.body.input.map(dereferenced), ...completedResponse(last.sentBytes).output],
    });
    await expectOneUserOneAssistant(sessionId);
  });

  it('Chat Completions (`.chat`): parallel calls streamed interleaved, every round on one message', async () => {
    const sessionId = `ai-sdk-${randomUUID()}`;
    gateway().double.script([{ toolCalls: weather, chunkChars: 3 }, { text: 'Rainy in Paris, sunny in Rome.' }]);
    const openai = await provider(sessionId);
    const exchanges = await toolLoop(openai.chat('gpt-double'));
    const last = exchanges.at(-1)!;
    const answer = { role: 'assistant', content: 'Rainy in Paris, sunny in Rome.' };
    const canonical = (history: { messages: unknown[] }) => canonicalChat(history.messages);
    await expectHistory(gateway().ledger, sessionId, 'openai', canonical, {
      messages: [...last.body.messages, answer],
    });
    await expectOneUserOneAssistant(sessionId);
  });
});

/** The response a Responses stream completed with, read from the bytes the double sent. */
function completedResponse(bytes: Buffer): { output: { id: string }[] } {
  const completed = bytes
    .toString('utf8')
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; response?: { output: { id: string }[] } })
    .find((event) => event.type === 'response.completed');
  return completed!.response!;
}
