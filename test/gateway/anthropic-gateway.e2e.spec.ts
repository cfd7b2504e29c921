import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { eventually, gatewayForSuite } from '../support/gateway-fixture.js';
import { canonicalJson, expectHistory, withoutAbsent } from '../support/gateway-history.js';

/**
 * @anthropic-ai/sdk through the gateway (`baseURL: …/gateway/anthropic`), against the provider
 * double: the bytes the client receives are the bytes the double sent; a tool loop with extended
 * thinking is accepted by the double (which checks each thinking signature), so the client sent
 * back exactly what it got; after every call the `anthropic` history with thinking is what the
 * client sent plus the answer.
 */
const MODEL = 'claude-double';
const tools: Anthropic.Tool[] = [
  { name: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
];
const weather = [
  { id: 'toolu_paris', name: 'weather', arguments: '{"city": "Paris"}' },
  { id: 'toolu_rome', name: 'weather', arguments: '{"city": "Rome"}' },
];
const thinking = { type: 'enabled' as const, budget_tokens: 1024 };

interface AnthropicConversation {
  readonly system?: string;
  readonly messages: readonly Anthropic.MessageParam[];
}

/**
 * Up to canonical JSON: a string content is the one text block it stands for, fields an SDK
 * leaves null or empty are absent, keys are sorted. Text, thinking and its signature, tool
 * inputs and results are compared as they are.
 */
function canonicalAnthropic({ system, messages }: AnthropicConversation): string {
  const blocks = (content: Anthropic.MessageParam['content']) =>
    typeof content === 'string' ? [{ type: 'text', text: content }] : content;
  return canonicalJson(
    withoutAbsent({ system, messages: messages.map(({ role, content }) => ({ role, content: blocks(content) })) }),
  );
}

describe('gateway: Anthropic Messages', () => {
  const gateway = gatewayForSuite();

  const lastExchange = () => gateway().double.exchanges.at(-1)!;
  const answered = (message: Anthropic.Message): Anthropic.MessageParam => ({
    role: 'assistant',
    content: message.content as Anthropic.ContentBlockParam[],
  });
  const expectRoundTrip = (sessionId: string, system: string | undefined, sent: Anthropic.MessageParam[]) =>
    expectHistory(gateway().ledger, sessionId, 'anthropic', canonicalAnthropic, { system, messages: sent });

  it('streams a tool loop with signed thinking byte for byte, accepted back, history at every step', async () => {
    const sessionId = `anthropic-${randomUUID()}`;
    const client = await gateway().anthropic({ sessionId, captureBytes: true });
    const system = 'You answer with tools.';
    const request = { model: MODEL, max_tokens: 2048, thinking, tools, system };
    const sent: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris and Rome?' }];
    gateway().double.script({
      reasoning: 'Two cities, two lookups.',
      text: 'Let me check both.',
      toolCalls: weather,
      chunkChars: 3,
    });

    const calling = await client.messages.stream({ ...request, messages: sent }).finalMessage();
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(calling.content.map((block) => block.type)).toEqual(['thinking', 'text', 'tool_use', 'tool_use']);
    await expectRoundTrip(sessionId, system, [...sent, answered(calling)]);

    const withResults: Anthropic.MessageParam[] = [
      ...sent,
      answered(calling),
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_paris', content: '18°C, light rain' },
          { type: 'tool_result', tool_use_id: 'toolu_rome', content: '24°C, sunny' },
        ],
      },
    ];
    gateway().double.script({ reasoning: 'Both known.', text: 'Paris is rainy at 18°C; Rome is sunny at 24°C.' });
    const answer = await client.messages.stream({ ...request, messages: withResults }).finalMessage();
    expect(lastExchange().status).toBe(200);
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(answer.content.map((block) => block.type)).toEqual(['thinking', 'text']);
    await expectRoundTrip(sessionId, system, [...withResults, answered(answer)]);

    // The history itself, sent as the next request, is accepted: signatures and tool pairs intact.
    const history = await gateway().ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/history?format=anthropic&includeThinking=true`,
    );
    const next: Anthropic.MessageParam[] = [...history.body.messages, { role: 'user', content: 'And tomorrow?' }];
    gateway().double.script({ text: 'No forecast for tomorrow.' });
    const followUp = await client.messages.create({ ...request, system: history.body.system, messages: next });
    expect(lastExchange().status).toBe(200);
    await expectRoundTrip(sessionId, system, [...next, answered(followUp)]);

    const tree = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    const roles = tree.body.messages.map((message: { role: string }) => message.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user', 'assistant']);
  });

  it('answers a whole (non-streaming) message byte for byte and records it', async () => {
    const sessionId = `anthropic-${randomUUID()}`;
    const client = await gateway().anthropic({ sessionId, captureBytes: true });
    gateway().double.script({ reasoning: 'French.', text: 'Bonjour.' });
    const sent: Anthropic.MessageParam[] = [{ role: 'user', content: 'Say hello in French.' }];
    const { data, response } = await client.messages
      .create({ model: MODEL, max_tokens: 256, thinking, messages: sent })
      .withResponse();
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(response.headers.get('x-ledger-session')).toBe(sessionId);
    await expectRoundTrip(sessionId, undefined, [...sent, answered(data)]);
    const messageId = response.headers.get('x-ledger-message');
    const message = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`);
    expect(message.body).toMatchObject({ role: 'assistant', model: MODEL, status: 'success' });
  });

  it('records an error the provider sends mid-stream on the answer, with what came before it', async () => {
    const sessionId = `anthropic-${randomUUID()}`;
    const client = await gateway().anthropic({ sessionId, captureBytes: true });
    gateway().double.script({
      text: 'A long answer that breaks off.',
      chunkChars: 2,
      failAfterChunks: 6,
      errorMessage: 'Overloaded',
    });
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 256,
      messages: [{ role: 'user', content: 'Talk.' }],
    });
    let seen = '';
    stream.on('text', (delta) => (seen += delta));
    await expect(stream.finalMessage()).rejects.toThrow(/Overloaded/);
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);

    // The SDK throws at the error event, before the gateway has recorded it: wait for the record.
    const assistantOf = (tree: { body: { messages?: { id: string; role: string; status: string }[] } }) =>
      tree.body.messages?.find((message) => message.role === 'assistant');
    const tree = await eventually(
      () => gateway().ledger.request('GET', `/v1/sessions/${sessionId}/tree`),
      (read) => assistantOf(read)?.status === 'error',
    );
    const assistant = assistantOf(tree)!;
    expect(assistant.status).toBe('error');
    const message = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}/messages/${assistant.id}`);
    const blocks = message.body.blocks as { type: string; content?: string; error?: { message?: string } }[];
    expect(blocks.filter((block) => block.type === 'main_text').map((block) => block.content)).toEqual([seen]);
    expect(seen).toBe('A long');
    expect(blocks.find((block) => block.type === 'error')?.error?.message).toMatch(/Overloaded/);
  });

  it('refuses a wrong ledger key as Anthropic does, and records nothing', async () => {
    const sessionId = `anthropic-${randomUUID()}`;
    const client = await gateway().anthropic({ sessionId, apiKey: 'not-a-ledger-key' });
    const exchangesBefore = gateway().double.exchanges.length;
    const refused = client.messages.create({
      model: MODEL,
      max_tokens: 16,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    await expect(refused).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    const error = (await refused.catch((caught: unknown) => caught)) as InstanceType<
      typeof Anthropic.AuthenticationError
    >;
    expect(error.status).toBe(401);
    expect(error.error).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.any(String) },
    });
    expect(gateway().double.exchanges.length).toBe(exchangesBefore);
    expect((await gateway().ledger.request('GET', `/v1/sessions/${sessionId}`)).status).toBe(404);
  });
});
