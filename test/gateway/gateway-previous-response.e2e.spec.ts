import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { eventually } from '../support/gateway-fixture.js';
import type { LedgerUnderTest } from '../support/ledger-http.js';
import { startLedgerWithUpstream, startOwnServer, type OwnServer } from '../support/own-upstream.js';
import { startProviderDouble, type ProviderDouble } from '../support/provider-doubles/index.js';

/**
 * Attack (issue 14, outsider review): a Responses request with `previous_response_id` is placed
 * after the session's active leaf, whatever response it names. A client that goes back to an
 * earlier response (how a Responses agent regenerates or edits a turn) gets an answer the provider
 * made from that earlier context, while the record puts the turn after the latest one: the history
 * no longer says what the model was given (the round-trip property fails).
 *
 * The provider double refuses `previous_response_id`; a small provider in front of it keeps each
 * response's conversation and expands `previous_response_id` into it, as the real API does.
 */
const MODEL = 'gpt-double';

describe('gateway: previous_response_id names the turn the answer follows', () => {
  let double: ProviderDouble;
  let provider: OwnServer;
  let ledger: LedgerUnderTest;
  const conversations = new Map<string, unknown[]>();

  beforeAll(async () => {
    double = await startProviderDouble({ keys: ['sk-responses'] });
    double.script((request) => ({ text: `answer to ${JSON.stringify(request.body.input.at(-1).content)}` }));
    provider = await startOwnServer((request, response) => {
      void (async () => {
        const body = JSON.parse(Buffer.concat(await request.toArray()).toString('utf8'));
        const { previous_response_id: previous, input, ...rest } = body;
        const turn = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
        const sent = [...(previous ? conversations.get(previous)! : []), ...turn];
        const answered = await fetch(`${double.baseUrl}/v1/responses`, {
          method: 'POST',
          headers: { authorization: request.headers.authorization!, 'content-type': 'application/json' },
          body: JSON.stringify({ ...rest, input: sent }),
        });
        const text = await answered.text();
        if (answered.ok) {
          const made = JSON.parse(text);
          conversations.set(made.id, [...sent, ...made.output]);
        }
        response.writeHead(answered.status, { 'content-type': 'application/json' }).end(text);
      })();
    });
    const baseUrl = `${provider.baseUrl}/v1`;
    ledger = await startLedgerWithUpstream({ protocol: 'openai', baseUrl, key: 'sk-responses' });
  });
  afterAll(async () => {
    await ledger?.close();
    await provider?.close();
    await double?.close();
  });

  it('going back to an earlier response branches there, as the provider did', async () => {
    const sessionId = `previous-${randomUUID()}`;
    const client = new OpenAI({
      baseURL: `${ledger.baseUrl}/gateway/openai/v1`,
      apiKey: await ledger.credentials.key('agent', { roles: ['producer', 'reader'] }),
      maxRetries: 0,
      defaultHeaders: { 'X-Ledger-Session': sessionId },
    });
    const first = await client.responses.create({ model: MODEL, input: 'A' });
    await client.responses.create({ model: MODEL, input: 'B', previous_response_id: first.id });
    // The client edits its second turn: it goes back to the first response and says C instead of B.
    const edited = await client.responses.create({ model: MODEL, input: 'C', previous_response_id: first.id });
    expect(edited.output_text).toBe('answer to "C"');
    const provided = conversations.get(edited.id)!;
    const said = (messages: { role: string; content: unknown }[]) =>
      messages.filter((message) => message.role === 'user').map((message) => message.content);
    expect(said(provided as never)).toEqual(['A', 'C']);

    const read = () => ledger.request('GET', `/v1/sessions/${sessionId}/history?format=openai`);
    const recorded = (answer: { status: number; body: unknown }) =>
      answer.status === 200 && JSON.stringify(answer.body).includes('"C"');
    const history = await eventually(read, recorded);
    const messages = (Array.isArray(history.body) ? history.body : history.body.messages) as never;
    expect(said(messages)).toEqual(['A', 'C']);
  });

  it("a response of another session is not this session's to continue: 400 before the provider is asked", async () => {
    const key = await ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    const client = (sessionId: string) =>
      new OpenAI({
        baseURL: `${ledger.baseUrl}/gateway/openai/v1`,
        apiKey: key,
        maxRetries: 0,
        defaultHeaders: { 'X-Ledger-Session': sessionId },
      });
    const elsewhere = await client(`elsewhere-${randomUUID()}`).responses.create({
      model: MODEL,
      input: 'secret context',
    });
    const asked = conversations.size;
    const error = await client(`here-${randomUUID()}`)
      .responses.create({ model: MODEL, input: 'what did I say?', previous_response_id: elsewhere.id })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ param: 'previous_response_id' });
    expect(conversations.size).toBe(asked);
  });
});
