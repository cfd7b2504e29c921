import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

/**
 * The key pool through the gateway, in a scripted 429 storm over three upstream keys: no client
 * request fails while one healthy key remains, a cooled key is not tried again, a session keeps
 * the key that answered it, and no upstream key is ever seen outside: not by the client, not in
 * the log, not in /metrics.
 */
const MODEL = 'gpt-double';

describe('gateway: key pool', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ keysPerUpstream: 3 });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('rides out a 429 storm on the healthy key, keeps sessions on it, and never shows a key', async () => {
    const [first, second, healthy] = gateway.openAiKeys as [string, string, string];
    gateway.double.script(() => ({ status: 429, retryAfter: 60 }), { key: first });
    gateway.double.script(() => ({ status: 429, retryAfter: 60 }), { key: second });
    gateway.double.script((request) => ({ text: `answer to ${String(request.body.messages.at(-1).content)}` }), {
      key: healthy,
    });
    const sessions = Array.from({ length: 6 }, () => `storm-${randomUUID()}`);
    const answers = await Promise.all(
      sessions.map(async (sessionId, index) => {
        const client = await gateway.openai({ sessionId });
        const completion = await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: 'user', content: `q${index}` }],
        });
        return completion.choices[0].message.content;
      }),
    );
    expect(answers).toEqual(sessions.map((_, index) => `answer to q${index}`));
    const byKey = (key: string) => gateway.double.exchanges.filter((exchange) => exchange.key === key);
    const refusedBefore = byKey(first).length + byKey(second).length;
    expect(byKey(first).length).toBeGreaterThan(0);
    expect(byKey(healthy).every((exchange) => exchange.status === 200)).toBe(true);

    // Second turns stay on the key that answered the session; the cooled keys are left alone for their Retry-After.
    const before = byKey(healthy).length;
    for (const [index, sessionId] of sessions.entries()) {
      const client = await gateway.openai({ sessionId });
      const messages = [
        { role: 'user' as const, content: `q${index}` },
        { role: 'assistant' as const, content: `answer to q${index}` },
        { role: 'user' as const, content: `again ${index}` },
      ];
      await client.chat.completions.create({ model: MODEL, messages });
    }
    expect(byKey(healthy)).toHaveLength(before + sessions.length);
    expect(byKey(first).length + byKey(second).length).toBe(refusedBefore);

    // The client's own key never reached the provider; the provider's keys never left the service.
    const clientKey = await gateway.ledger.credentials.key('agent');
    expect(gateway.double.exchanges.some((exchange) => JSON.stringify(exchange.headers).includes(clientKey))).toBe(
      false,
    );
    const metrics = await fetch(`${gateway.ledger.baseUrl}/metrics`, {
      headers: { authorization: `Bearer ${gateway.ledger.credentials.adminKey}` },
    }).then((response) => response.text());
    expect(metrics).toMatch(
      /ledger_gateway_upstream_key_cooldowns_total\{upstream="openai-double",key="[0-9a-f]{8}",reason="rate_limited"\} \d+/,
    );
    expect(metrics).toMatch(
      /ledger_gateway_upstream_attempts_total\{upstream="openai-double",key="[0-9a-f]{8}",outcome="ok"\} \d+/,
    );
    const database = new pg.Client({ connectionString: gateway.ledger.database.connectionString });
    await database.connect();
    try {
      const { rows } = await database.query<{ text: string }>(
        "SELECT string_agg(event_log_records::text, ' ') AS text FROM event_log_records",
      );
      for (const key of [...gateway.openAiKeys, ...gateway.anthropicKeys]) {
        expect(metrics).not.toContain(key);
        expect(rows[0].text).not.toContain(key);
      }
    } finally {
      await database.end();
    }
  });
});
