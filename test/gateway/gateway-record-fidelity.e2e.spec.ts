import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { eventually, startGateway, type GatewayFixture } from '../support/gateway-fixture.js';
import type { LedgerUnderTest } from '../support/ledger-http.js';
import { startLedgerWithUpstream, startOwnServer, type OwnServer } from '../support/own-upstream.js';

/**
 * Attacks on the record (issue 14, outsider review): the record must say what the client got.
 * - The Anthropic SDK reads a stream by its SSE `event:` names (it skips `ping` and nameless
 *   events); the recorder reads only the JSON `type`. A provider stream (or anything between the
 *   gateway and the provider) can put text in the record that the client never saw.
 * - A whole answer over LEDGER_GATEWAY_MAX_RESPONSE_BYTES reaches the client as a 502, but its
 *   call was already placed: the answer's message stays in the tree, empty and never ended.
 */
const SEEN = 'The client sees this.';
const HIDDEN = ' The record alone says this.';

/** Anthropic Messages stream events; `hidden` frames carry a text delta under names the SDK skips. */
function anthropicStream(): string {
  const frame = (event: string | undefined, data: unknown) =>
    `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;
  const delta = (text: string) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
  const usage = { input_tokens: 3, output_tokens: 5 };
  const message = {
    ...{ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-crafted', content: [] },
    ...{ stop_reason: null, stop_sequence: null, usage },
  };
  return [
    frame('message_start', { type: 'message_start', message }),
    frame('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    frame('content_block_delta', delta(SEEN)),
    frame('ping', delta(HIDDEN)),
    frame(undefined, delta(HIDDEN)),
    frame('content_block_stop', { type: 'content_block_stop', index: 0 }),
    frame('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: 5 },
    }),
    frame('message_stop', { type: 'message_stop' }),
  ].join('');
}

/** A provider that answers every request with `stream` as server-sent events. */
function streamingUpstream(stream: string): Promise<OwnServer> {
  return startOwnServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'text/event-stream' }).end(stream));
  });
}

describe('gateway: the record says what the client received', () => {
  let ledger: LedgerUnderTest;
  let provider: OwnServer;

  beforeAll(async () => {
    provider = await streamingUpstream(anthropicStream());
    const baseUrl = `${provider.baseUrl}/v1`;
    ledger = await startLedgerWithUpstream({ protocol: 'anthropic', baseUrl, key: 'sk-ant-crafted' });
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
  });

  it('events the Anthropic SDK skips (ping, no event name) are not recorded as answer text', async () => {
    const sessionId = `crafted-${randomUUID()}`;
    const client = new Anthropic({
      baseURL: `${ledger.baseUrl}/gateway/anthropic`,
      apiKey: await ledger.credentials.key('agent', { roles: ['producer', 'reader'] }),
      maxRetries: 0,
      defaultHeaders: { 'X-Ledger-Session': sessionId },
    });
    const { data: stream, response } = await client.messages
      .create({
        model: 'claude-crafted',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'Say something' }],
        stream: true,
      })
      .withResponse();
    let received = '';
    for await (const event of stream) {
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') received += event.delta.text;
    }
    expect(received).toBe(SEEN);
    const messageId = response.headers.get('x-ledger-message')!;
    const read = () =>
      ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`).then((answer) => answer.body);
    const message = await eventually(read, (body) => body?.status === 'success');
    const text = message.blocks.find((block: { type: string }) => block.type === 'main_text');
    expect(text.content).toBe(received);
  });
});

describe('gateway: a whole answer the gateway refuses to relay', () => {
  const MODEL = 'gpt-double';
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ openAiModels: [MODEL], env: { LEDGER_GATEWAY_MAX_RESPONSE_BYTES: '1024' } });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('an answer too large to relay leaves no message that looks unfinished forever', async () => {
    const sessionId = `too-large-${randomUUID()}`;
    gateway.double.script({ text: 'x'.repeat(4_000) });
    const client = await gateway.openai({ sessionId });
    const error = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Write a lot' }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    // The read model follows the log, and the gateway records how the answer ended after refusing it: wait
    // (bounded) for the placed turns to settle. A call that placed nothing never shows any; one left
    // unfinished is still `processing` when the wait ends, and fails below.
    const readTree = () => gateway.ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    const settled = (answer: Awaited<ReturnType<typeof readTree>>) =>
      answer.status === 200 &&
      answer.body.messages.length >= 2 &&
      answer.body.messages.every((message: { status: string }) => message.status !== 'processing');
    const tree = await eventually(readTree, settled);
    // Either nothing was recorded (the client got no answer), or the answer's message says how it ended.
    const messages: { role: string; status: string }[] = tree.status === 404 ? [] : tree.body.messages;
    const answers = messages.filter((message) => message.role === 'assistant');
    expect(answers.map((message) => message.status)).toEqual(answers.map(() => 'error'));
  });
});

describe('gateway: an answer the log cannot take whole', () => {
  const BEFORE = 'Recorded before ';
  let ledger: LedgerUnderTest;
  let provider: OwnServer;

  /** A Chat Completions stream: text, a delta with a NUL the log cannot store, more text, [DONE], then what the SDK skips. */
  function chatStream(): string {
    const chunk = (content: string) => {
      const choices = [{ index: 0, delta: { content }, finish_reason: null }];
      return `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-own', choices })}\n\n`;
    };
    return [chunk(BEFORE), chunk('the\u0000NUL'), chunk(' after'), 'data: [DONE]\n\n', chunk(HIDDEN)].join('');
  }

  beforeAll(async () => {
    provider = await streamingUpstream(chatStream());
    ledger = await startLedgerWithUpstream({ protocol: 'openai', baseUrl: `${provider.baseUrl}/v1`, key: 'sk-own' });
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
  });

  it('records what came before the refused event, marks the gap, and nothing after [DONE]', async () => {
    const sessionId = `unstorable-${randomUUID()}`;
    const client = new OpenAI({
      baseURL: `${ledger.baseUrl}/gateway/openai/v1`,
      apiKey: await ledger.credentials.key('agent', { roles: ['producer', 'reader'] }),
      maxRetries: 0,
      defaultHeaders: { 'X-Ledger-Session': sessionId },
    });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'gpt-own', messages: [{ role: 'user', content: 'Say something' }], stream: true })
      .withResponse();
    let received = '';
    for await (const chunk of stream) received += chunk.choices[0]?.delta.content ?? '';
    expect(received).toBe(`${BEFORE}the\u0000NUL after`);
    const messageId = response.headers.get('x-ledger-message')!;
    const read = () =>
      ledger.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`).then((answer) => answer.body);
    const message = await eventually(read, (body) => body?.status === 'error');
    const text = message.blocks.find((block: { type: string }) => block.type === 'main_text');
    expect(text.content).toBe(BEFORE);
    expect(JSON.stringify(message.blocks)).toContain('RecordingGap');
    expect(JSON.stringify(message)).not.toContain(HIDDEN.trim());
  });
});
