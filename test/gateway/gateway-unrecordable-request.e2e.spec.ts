import { randomUUID } from 'node:crypto';
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

/**
 * Attack (issue 14, outsider review): the body's JSON is checked for what the log can store, but
 * tool-call arguments arrive as a JSON text inside it and are parsed later. Arguments nested 1000
 * deep pass the gateway, reach the provider, and are answered 200 with an `X-Ledger-Message`, yet
 * the call's record is refused: the session is opened empty, the message named never exists, and
 * nothing marks the loss. Any producer can have calls answered off the record this way (and each
 * such call tells the gateway the log is unhealthy).
 */
const MODEL = 'gpt-double';

describe('gateway: a request the record cannot hold', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ openAiModels: [MODEL] });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('deeply nested tool arguments are refused naming the field before any provider is asked', async () => {
    const sessionId = `deep-${randomUUID()}`;
    gateway.double.script({ text: 'Answered.' });
    const deep = '['.repeat(1_000) + ']'.repeat(1_000);
    const call = { id: 'call_deep', type: 'function', function: { name: 'lookup', arguments: deep } };
    const messages = [
      { role: 'user', content: 'Look it up' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_deep', content: 'found' },
    ];
    const key = await gateway.ledger.credentials.key('agent', { roles: ['producer', 'reader'] });
    const before = gateway.double.exchanges.length;
    const response = await fetch(`${gateway.ledger.baseUrl}/gateway/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-ledger-session': sessionId },
      body: JSON.stringify({ model: MODEL, messages }),
    });
    const body = (await response.json()) as { error?: { param?: string } };
    expect(response.status).toBe(400);
    expect(body.error?.param).toBe('messages[1].tool_calls[0].function.arguments');
    expect(gateway.double.exchanges.length).toBe(before);
  });
});
