/**
 * Probe: the gateway's quota check runs on the state before the call, the record's check only
 * after the provider answered. Parallel calls on a session just under its quota all pass the
 * first check, all reach the provider, and all but one are relayed to the client unrecorded.
 */
import { startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

describe('parallel gateway calls on a session at its quota', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ env: { LEDGER_SESSION_MAX_EVENTS: '12' } });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  const eventCount = async (sessionId: string) => {
    const reader = await gateway.ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000`);
    return reader.body?.events?.length ?? reader.status;
  };

  it('answers calls the session could not record', async () => {
    gateway.double.script(() => ({ text: 'Yes.', firstByteDelayMs: 800 }));
    const client = await gateway.openai({ sessionId: 'parallel-quota' });
    const ask = (content: string) =>
      client.chat.completions.create({ model: 'gpt-double', messages: [{ role: 'user', content }] });
    await ask('first');
    // Wait for the record, then see how full it is.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = await eventCount('parallel-quota');
    const upstreamBefore = gateway.double.exchanges.length;
    const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => ask(`parallel ${i}`)));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const after = await eventCount('parallel-quota');
    console.log(results.map((r) => (r.status === 'rejected' ? String((r as PromiseRejectedResult).reason) : 'ok')));
    const answered = results.filter((r) => r.status === 'fulfilled').length;
    const upstream = gateway.double.exchanges.length - upstreamBefore;
    const session = await gateway.ledger.request('GET', '/v1/sessions/parallel-quota/tree');
    const assistantAnswers = Object.values(session.body?.messages ?? {}).length;
    console.log(JSON.stringify({ before, after, answered, upstream, treeStatus: session.status, treeKeys: Object.keys(session.body ?? {}), assistantAnswers }));
    // Every parallel call reached the provider and was answered, though the session took at most one more.
    expect(upstream).toBe(6);
    expect(answered).toBe(6);
  }, 120_000);
});
