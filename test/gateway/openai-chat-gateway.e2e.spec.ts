import { randomUUID } from 'node:crypto';
import type OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { eventually, startGateway, type GatewayFixture } from '../support/gateway-fixture.js';
import { canonicalChat } from '../support/gateway-history.js';

/**
 * The official OpenAI client through the gateway (Chat Completions), against the provider double:
 * the bytes it receives are the bytes the double sent, and after every call the session's history
 * is what the client sent plus the answer it got.
 */
const MODEL = 'gpt-double';
const weather = [
  { id: 'call_paris', name: 'weather', arguments: '{"city": "Paris"}' },
  { id: 'call_rome', name: 'weather', arguments: '{"city": "Rome"}' },
];

describe('gateway: OpenAI Chat Completions', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterEach(() => gateway.double.resetScripts());
  afterAll(async () => {
    await gateway?.close();
  });

  const history = (sessionId: string) =>
    gateway.ledger
      .request('GET', `/v1/sessions/${sessionId}/history?format=openai`)
      .then((response) => response.body as { messages?: unknown[] });

  async function expectRoundTrip(sessionId: string, sent: readonly unknown[], answer: unknown) {
    const expected = canonicalChat([...sent, answer]);
    const read = await eventually(
      () => history(sessionId),
      (body) => canonicalChat(body.messages ?? []) === expected,
    );
    expect(canonicalChat(read.messages ?? [])).toBe(expected);
  }

  async function streamed(client: OpenAI, messages: ChatCompletionMessageParam[]) {
    const stream = client.chat.completions.stream({ model: MODEL, messages, stream: true });
    return (await stream.finalChatCompletion()).choices[0].message;
  }

  it('streams an answer byte for byte and records the tool loop as one assistant message, round by round', async () => {
    const sessionId = `chat-${randomUUID()}`;
    const client = await gateway.openai({ sessionId, captureBytes: true });
    const sent: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You answer with tools.' },
      { role: 'user', content: 'Weather in Paris and Rome?' },
    ];
    gateway.double.script({ text: 'Let me check both.', toolCalls: weather, chunkChars: 3 });
    const calling = await streamed(client, [...sent]);
    expect(gateway.received.at(-1)).toEqual(gateway.double.exchanges.at(-1)!.sentBytes);
    expect(calling.tool_calls).toHaveLength(2);
    await expectRoundTrip(sessionId, sent, calling);

    const withResults: ChatCompletionMessageParam[] = [
      ...sent,
      calling,
      { role: 'tool', tool_call_id: 'call_paris', content: '18°C, light rain' },
      { role: 'tool', tool_call_id: 'call_rome', content: '24°C, sunny' },
    ];
    gateway.double.script({ text: 'Paris is rainy at 18°C; Rome is sunny at 24°C.' });
    const answer = await streamed(client, withResults);
    expect(gateway.received.at(-1)).toEqual(gateway.double.exchanges.at(-1)!.sentBytes);
    await expectRoundTrip(sessionId, withResults, answer);

    const tree = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    expect(tree.body.messages.map((message: { role: string }) => message.role)).toEqual([
      'system',
      'user',
      'assistant',
    ]);
    const [assistant] = tree.body.messages.filter((message: { role: string }) => message.role === 'assistant');
    expect(assistant.status).toBe('success');
  });

  it('answers a whole (non-streaming) completion with the position of its record', async () => {
    const sessionId = `chat-${randomUUID()}`;
    const client = await gateway.openai({ sessionId, captureBytes: true });
    gateway.double.script({ text: 'Bonjour.' });
    const sent: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Say hello in French.' }];
    const { data, response } = await client.chat.completions.create({ model: MODEL, messages: sent }).withResponse();
    expect(gateway.received.at(-1)).toEqual(gateway.double.exchanges.at(-1)!.sentBytes);
    expect(response.headers.get('x-ledger-session')).toBe(sessionId);
    const position = Number(response.headers.get('x-ledger-position'));
    expect(position).toBeGreaterThan(0);
    const read = await gateway.ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/history?format=openai&minPosition=${position}`,
    );
    expect(canonicalChat(read.body.messages)).toBe(canonicalChat([...sent, data.choices[0].message]));
    const message = await gateway.ledger.request(
      'GET',
      `/v1/sessions/${sessionId}/messages/${response.headers.get('x-ledger-message')}`,
    );
    expect(message.body).toMatchObject({ role: 'assistant', model: MODEL, status: 'success' });
  });

  it('without a session header, every call is a session of its own', async () => {
    const client = await gateway.openai();
    gateway.double.script([{ text: 'One.' }, { text: 'Two.' }]);
    const first = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Count' }] })
      .withResponse();
    const second = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Count' }] })
      .withResponse();
    const [a, b] = [first.response.headers.get('x-ledger-session'), second.response.headers.get('x-ledger-session')];
    expect(a).toBeTruthy();
    expect(b).toBeTruthy();
    expect(a).not.toBe(b);
  });
});
