/**
 * Probe: one gateway request is "the command that crosses the line", but its size is bounded by
 * LEDGER_GATEWAY_MAX_REQUEST_BYTES (32 MiB), not the 1 MiB body limit, and a conversation of N
 * messages folds in ~N^2: one request both overshoots the quota by orders of magnitude and blocks
 * the event loop.
 */
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

describe('one gateway request against a small quota', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ env: { LEDGER_SESSION_MAX_EVENTS: '100', LEDGER_SESSION_MAX_BYTES: '65536' } });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('records a conversation far past the quota in one call, blocking the service meanwhile', async () => {
    gateway.double.script(() => ({ text: 'ok' }));
    const client = await gateway.openai({ sessionId: 'one-big-request' });
    const n = 8_000;
    const messages = Array.from({ length: n }, (_, i) =>
      i % 2 === 0 ? { role: 'user' as const, content: `q${i}` } : { role: 'assistant' as const, content: `a${i}` },
    );
    if (messages.at(-1)!.role !== 'user') messages.push({ role: 'user', content: 'last' });
    let maxHealthMs = 0;
    let healthErrors = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const start = performance.now();
        await fetch(`${gateway.ledger.baseUrl}/health`, { headers: { connection: 'close' } }).then((r) => r.text()).catch(() => (healthErrors += 1));
        maxHealthMs = Math.max(maxHealthMs, performance.now() - start);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const start = performance.now();
    await client.chat.completions.create({ model: 'gpt-double', messages });
    const callMs = performance.now() - start;
    polling = false;
    await poll;
    // Count every stored event (paged).
    let events = 0;
    let last = '0';
    for (let from: string | null = '0'; from !== null; ) {
      const page = await gateway.ledger.request('GET', `/v1/sessions/one-big-request/events?limit=1000&from=${from}`);
      events += page.body.events.length;
      if (page.body.events.length) last = String(page.body.events.at(-1).position);
      from = page.body.next ?? null;
      if (page.body.events.length === 0) break;
    }
    const cold = performance.now();
    const at = await gateway.ledger.request('GET', `/v1/sessions/one-big-request?at=${last}`);
    const atMs = performance.now() - cold;
    console.log(JSON.stringify({ n, callMs: Math.round(callMs), maxHealthMs: Math.round(maxHealthMs), healthErrors, events, atStatus: at.status, atMs: Math.round(atMs) }));
    expect(events).toBeGreaterThan(100 * 1.25 * 10);
  }, 600_000);
});
