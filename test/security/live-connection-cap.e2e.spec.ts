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

  it('opens at most the cap at once, the rest get 429, and a burst cannot slip past it', async () => {
    const { id } = (await ledger.request('POST', '/v1/sessions', { title: 'watched' })).body;
    const key = await ledger.credentials.key('client');
    const burst = Array.from({ length: 10 }, () => connectSse(`${ledger.baseUrl}/v1/sessions/${id}/live`, { key }));
    connections.push(...burst);
    const answers = await Promise.all(burst.map((connection) => connection.opened));
    expect(answers.filter(({ status }) => status === 200)).toHaveLength(CAP);
    const refused = answers.filter(({ status }) => status !== 200);
    expect(refused).toHaveLength(10 - CAP);
    for (const answer of refused)
      expect(answer).toMatchObject({ status: 429, body: { error: { code: 'too_many_live_connections' } } });
  });
});
