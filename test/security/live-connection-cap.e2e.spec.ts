import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually } from '../support/probe.js';
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

/**
 * Live streams hold their connection for as long as they run, and the connection cap never closes
 * one to make room (decision 0029): a tenant with many keys could take every slot with streams.
 * A tenant's credentials together stay under the tenant's cap; other tenants still get in.
 */
describe('attack: one tenant filling the connection slots with live streams from several keys', () => {
  const PER_CREDENTIAL = 2;
  const PER_TENANT = 3;
  let ledger: LedgerUnderTest;
  const connections: SseConnection[] = [];
  const live = (key: string) => {
    const connection = connectSse(`${ledger.baseUrl}/v1/events/live`, { key });
    connections.push(connection);
    return connection;
  };
  beforeAll(async () => {
    ledger = await startLedger({
      LEDGER_LIVE_MAX_PER_CREDENTIAL: String(PER_CREDENTIAL),
      LEDGER_LIVE_MAX_PER_TENANT: String(PER_TENANT),
    });
  });
  afterAll(async () => {
    for (const connection of connections) connection.close();
    await ledger?.close();
  });

  it("opens at most the tenant's cap across its keys, the rest get 429, and other tenants still get in", async () => {
    const keys = [
      await ledger.credentials.key('acme-one', { tenant: 'acme' }),
      await ledger.credentials.key('acme-two', { tenant: 'acme' }),
    ];
    const burst = keys.flatMap((key) => Array.from({ length: PER_CREDENTIAL }, () => live(key)));
    const answers = await Promise.all(burst.map((connection) => connection.opened));
    expect(answers.filter(({ status }) => status === 200)).toHaveLength(PER_TENANT);
    const refused = answers.filter(({ status }) => status !== 200);
    expect(refused).toEqual([
      {
        status: 429,
        body: {
          error: { code: 'too_many_live_connections', message: 'this tenant has 3 live connections open already' },
        },
      },
    ]);

    const otherTenant = await ledger.credentials.key('globex-one', { tenant: 'globex' });
    expect((await live(otherTenant).opened).status).toBe(200);

    // A stream given back makes room for the tenant again, through the key that gave it back: the other
    // key may hold its own cap already, depending on which stream of the burst was refused.
    const given = answers.findIndex(({ status }) => status === 200);
    burst[given].close();
    const givingKey = keys[Math.floor(given / PER_CREDENTIAL)];
    const reopened = async () => {
      const connection = live(givingKey);
      const { status } = await connection.opened;
      if (status !== 200) connection.close();
      return status === 200 || undefined;
    };
    await eventually("a stream of the tenant's to be accepted again", reopened, 20_000);
  });
});
