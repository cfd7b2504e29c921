import { randomUUID } from 'node:crypto';
import type OpenAI from 'openai';
import { gatewayForSuite } from '../support/gateway-fixture.js';
import {
  canonicalResponses,
  expectHistory,
  historyPath,
  type ResponsesConversation,
} from '../support/gateway-history.js';

/**
 * The official OpenAI client's Responses API through the gateway, against the provider double:
 * bytes received equal the bytes the double sent; a tool loop with reasoning kept client-side
 * (`store: false`, `include: ["reasoning.encrypted_content"]`) is accepted by the double, which
 * refuses a function call sent back without its reasoning item; after every call the
 * `openai-responses` history with thinking is what the client sent plus the answer's output items.
 */
const MODEL = 'o-double';
const tools: OpenAI.Responses.Tool[] = [
  {
    type: 'function',
    name: 'weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
    strict: false,
  },
];
const weather = [
  { id: 'call_paris', name: 'weather', arguments: '{"city": "Paris"}' },
  { id: 'call_rome', name: 'weather', arguments: '{"city": "Rome"}' },
];
const request = { model: MODEL, tools, store: false, include: ['reasoning.encrypted_content' as const] };

type Item = OpenAI.Responses.ResponseInputItem;

describe('gateway: OpenAI Responses', () => {
  const gateway = gatewayForSuite();

  const lastExchange = () => gateway().double.exchanges.at(-1)!;
  const expectRoundTrip = (sessionId: string, conversation: ResponsesConversation) =>
    expectHistory(gateway().ledger, sessionId, 'openai-responses', canonicalResponses, conversation);

  async function streamed(client: OpenAI, body: Omit<OpenAI.Responses.ResponseCreateParamsStreaming, 'stream'>) {
    const stream = await client.responses.create({ ...body, stream: true });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    return completed!.output as Item[];
  }

  it('streams a tool loop with encrypted reasoning byte for byte, accepted back, history at every step', async () => {
    const sessionId = `responses-${randomUUID()}`;
    const client = await gateway().openai({ sessionId, captureBytes: true });
    const instructions = 'You answer with tools.';
    const user: Item = { role: 'user', content: 'Weather in Paris and Rome?' };
    gateway().double.script({
      reasoning: 'Two cities, two lookups.',
      text: 'Checking both.',
      toolCalls: weather,
      chunkChars: 3,
    });

    const calling = await streamed(client, { ...request, instructions, input: [user] });
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(calling.map((item) => item.type)).toEqual(['reasoning', 'message', 'function_call', 'function_call']);
    expect(calling[0]).toMatchObject({ encrypted_content: expect.any(String) });
    await expectRoundTrip(sessionId, { instructions, input: [user, ...calling] });

    const results: Item[] = [
      { type: 'function_call_output', call_id: 'call_paris', output: '18°C, light rain' },
      { type: 'function_call_output', call_id: 'call_rome', output: '24°C, sunny' },
    ];
    const withResults = [user, ...calling, ...results];
    gateway().double.script({ reasoning: 'Both known.', text: 'Paris is rainy at 18°C; Rome is sunny at 24°C.' });
    const answer = await streamed(client, { ...request, instructions, input: withResults });
    expect(lastExchange().status).toBe(200);
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    await expectRoundTrip(sessionId, { instructions, input: [...withResults, ...answer] });
    expectEveryChangeToCount({ instructions, input: [...withResults, ...answer] });

    // The history itself, sent back with a new question, is accepted: reasoning items come before their calls.
    const history = (await gateway().ledger.request('GET', historyPath(sessionId, 'openai-responses'))).body;
    const next: Item[] = [...history.input, { role: 'user', content: 'And tomorrow?' }];
    gateway().double.script({ text: 'No forecast for tomorrow.' });
    const followUp = await client.responses.create({ ...request, instructions: history.instructions, input: next });
    expect(lastExchange().status).toBe(200);
    await expectRoundTrip(sessionId, { instructions, input: [...next, ...(followUp.output as Item[])] });

    const tree = await gateway().ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    const roles = tree.body.messages.map((message: { role: string }) => message.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user', 'assistant']);
  });

  it('answers a whole (non-streaming) response byte for byte and records it', async () => {
    const sessionId = `responses-${randomUUID()}`;
    const client = await gateway().openai({ sessionId, captureBytes: true });
    gateway().double.script({ reasoning: 'French.', text: 'Bonjour.' });
    const { data, response } = await client.responses
      .create({ ...request, instructions: 'Be brief.', input: 'Say hello in French.' })
      .withResponse();
    expect(gateway().received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(data.output_text).toBe('Bonjour.');
    await expectRoundTrip(sessionId, {
      instructions: 'Be brief.',
      input: [{ role: 'user', content: 'Say hello in French.' }, ...(data.output as Item[])],
    });
    const message = await gateway().ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/messages/${response.headers.get('x-ledger-message')}`,
    );
    expect(message.body).toMatchObject({ role: 'assistant', model: MODEL, status: 'success' });
  });
});

/**
 * The comparison drops only ids and statuses: removing any item, or changing a message's text, a
 * call's name or arguments, a result or a reasoning item, makes another conversation.
 */
function expectEveryChangeToCount(conversation: { instructions: string; input: readonly Item[] }) {
  const original = canonicalResponses(conversation);
  const changed = (item: Record<string, any>): Record<string, unknown>[] => {
    switch (item.type) {
      case 'message':
        return [{ ...item, content: item.content.map((part: object) => ({ ...part, text: 'changed' })) }];
      case 'function_call':
        return [
          { ...item, name: 'changed' },
          { ...item, arguments: '{"changed":true}' },
        ];
      case 'function_call_output':
        return [{ ...item, output: 'changed' }];
      case 'reasoning':
        return [
          { ...item, encrypted_content: 'changed' },
          { ...item, id: 'rs_changed' },
        ];
      default:
        return [{ ...item, content: 'changed' }];
    }
  };
  const variants = conversation.input.flatMap((item, index) => [
    conversation.input.filter((_, other) => other !== index),
    ...changed(item).map((variant) => conversation.input.map((each, other) => (other === index ? variant : each))),
  ]);
  expect(new Set(conversation.input.map((item) => item.type ?? 'message'))).toEqual(
    new Set(['message', 'reasoning', 'function_call', 'function_call_output']),
  );
  for (const input of variants) expect(canonicalResponses({ ...conversation, input })).not.toBe(original);
}
