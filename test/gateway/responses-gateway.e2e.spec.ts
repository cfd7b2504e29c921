import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';
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
  { type: 'function', name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false },
];
const weather = [
  { id: 'call_paris', name: 'weather', arguments: '{"city": "Paris"}' },
  { id: 'call_rome', name: 'weather', arguments: '{"city": "Rome"}' },
];
const request = { model: MODEL, tools, store: false, include: ['reasoning.encrypted_content' as const] };

type Item = OpenAI.Responses.ResponseInputItem;

describe('gateway: OpenAI Responses', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterEach(() => gateway.double.resetScripts());
  afterAll(async () => {
    await gateway?.close();
  });

  const lastExchange = () => gateway.double.exchanges.at(-1)!;
  const expectRoundTrip = (sessionId: string, conversation: ResponsesConversation) =>
    expectHistory(gateway.ledger, sessionId, 'openai-responses', canonicalResponses, conversation);

  async function streamed(client: OpenAI, body: Omit<OpenAI.Responses.ResponseCreateParamsStreaming, 'stream'>) {
    const stream = await client.responses.create({ ...body, stream: true });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    return completed!.output as Item[];
  }

  it('streams a tool loop with encrypted reasoning byte for byte, accepted back by the provider, history at every step', async () => {
    const sessionId = `responses-${randomUUID()}`;
    const client = await gateway.openai({ sessionId, captureBytes: true });
    const instructions = 'You answer with tools.';
    const user: Item = { role: 'user', content: 'Weather in Paris and Rome?' };
    gateway.double.script({ reasoning: 'Two cities, two lookups.', text: 'Checking both.', toolCalls: weather, chunkChars: 3 });

    const calling = await streamed(client, { ...request, instructions, input: [user] });
    expect(gateway.received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(calling.map((item) => item.type)).toEqual(['reasoning', 'message', 'function_call', 'function_call']);
    expect(calling[0]).toMatchObject({ encrypted_content: expect.any(String) });
    await expectRoundTrip(sessionId, { instructions, input: [user, ...calling] });

    const results: Item[] = [
      { type: 'function_call_output', call_id: 'call_paris', output: '18°C, light rain' },
      { type: 'function_call_output', call_id: 'call_rome', output: '24°C, sunny' },
    ];
    const withResults = [user, ...calling, ...results];
    gateway.double.script({ reasoning: 'Both known.', text: 'Paris is rainy at 18°C; Rome is sunny at 24°C.' });
    const answer = await streamed(client, { ...request, instructions, input: withResults });
    expect(lastExchange().status).toBe(200);
    expect(gateway.received.at(-1)).toEqual(lastExchange().sentBytes);
    await expectRoundTrip(sessionId, { instructions, input: [...withResults, ...answer] });

    // The history itself, sent back with a new question, is accepted: reasoning items come before their calls.
    const history = (await gateway.ledger.request('GET', historyPath(sessionId, 'openai-responses'))).body;
    const next: Item[] = [...history.input, { role: 'user', content: 'And tomorrow?' }];
    gateway.double.script({ text: 'No forecast for tomorrow.' });
    const followUp = await client.responses.create({ ...request, instructions: history.instructions, input: next });
    expect(lastExchange().status).toBe(200);
    await expectRoundTrip(sessionId, { instructions, input: [...next, ...(followUp.output as Item[])] });

    const tree = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    const roles = tree.body.messages.map((message: { role: string }) => message.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user', 'assistant']);
  });

  it('answers a whole (non-streaming) response byte for byte and records it', async () => {
    const sessionId = `responses-${randomUUID()}`;
    const client = await gateway.openai({ sessionId, captureBytes: true });
    gateway.double.script({ reasoning: 'French.', text: 'Bonjour.' });
    const { data, response } = await client.responses
      .create({ ...request, instructions: 'Be brief.', input: 'Say hello in French.' })
      .withResponse();
    expect(gateway.received.at(-1)).toEqual(lastExchange().sentBytes);
    expect(data.output_text).toBe('Bonjour.');
    await expectRoundTrip(sessionId, {
      instructions: 'Be brief.',
      input: [{ role: 'user', content: 'Say hello in French.' }, ...(data.output as Item[])],
    });
    const message = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/messages/${response.headers.get('x-ledger-message')}`);
    expect(message.body).toMatchObject({ role: 'assistant', model: MODEL, status: 'success' });
  });

  it('compares up to ids and statuses only: a changed text, call, result or reasoning item is a different conversation', () => {
    const reasoning = { id: 'rs_1', type: 'reasoning', summary: [{ type: 'summary_text', text: 'Why.' }], encrypted_content: 'e1' };
    const message = { id: 'msg_1', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hi', annotations: [] }] };
    const call = { id: 'fc_1', type: 'function_call', status: 'completed', call_id: 'c1', name: 'weather', arguments: '{"city":"Paris"}' };
    const output = { type: 'function_call_output', call_id: 'c1', output: 'sunny' };
    const conversation = (items: readonly unknown[]) => canonicalResponses({ input: items as Item[] });
    const original = conversation([reasoning, message, call, output]);
    const unidentified = [reasoning, { ...message, id: undefined, status: undefined }, { type: call.type, call_id: 'c1', name: 'weather', arguments: '{ "city": "Paris" }' }, output];
    expect(conversation(unidentified)).toBe(original);
    const changed = [
      [reasoning, { ...message, content: [{ type: 'output_text', text: 'Hello' }] }, call, output],
      [reasoning, message, { ...call, arguments: '{"city":"Rome"}' }, output],
      [reasoning, message, { ...call, name: 'forecast' }, output],
      [reasoning, message, call, { ...output, output: 'rainy' }],
      [{ ...reasoning, encrypted_content: 'e2' }, message, call, output],
      [{ ...reasoning, id: 'rs_2' }, message, call, output],
      [message, call, output],
    ];
    for (const items of changed) expect(conversation(items)).not.toBe(original);
  });
});
