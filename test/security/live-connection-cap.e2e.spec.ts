import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';

describe('attack: a burst of live connections past the per-credential cap', () => {
  const CAP = 2;
  let ledger: LedgerUnderTest;
  const connections: SseConnection[] = [];
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_MAX_PER_CREDENTIAL: String(CAP) });
  });
  afterAll(async () => {
    for (const connection of connections) connection.close();
    await ledger?.close();
  });

  it('opens at most the cap, the rest get 429', async () => {
    const { id } = (await ledger.request('POST', '/v1/sessions', { title: 'watched' })).body;
    const key = await ledger.credentials.key('client');
    await ledger.credentials.key('other');
    const head = (await ledger.request('GET', '/v1/admin/keys', undefined, undefined, 'admin')).body;
    const events = (await ledger.request('GET', `/v1/sessions/${id}/events`)).body.events;
    console.log(JSON.stringify(events.map((e: any) => e.position)), head.keys.length);
    const from = events.at(-1).position + 1;
    connections.push(...Array.from({ length: 10 }, () => connectSse(`${ledger.baseUrl}/v1/sessions/${id}/live?from=${from}`, { key })));
    await new Promise((r) => setTimeout(r, 500));
    await ledger.request('POST', `/v1/sessions/${id}/messages`, { role: 'user', content: 'wake' });
    const statuses = await Promise.all(connections.map((connection) => connection.opened.then(({ status, body }) => `${status} ${JSON.stringify(body)}`)));
    console.log(statuses);
  });
});
