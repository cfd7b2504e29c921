import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * `/metrics` and `POST /v1/admin/rebuild` act on the whole service: the metrics count every
 * tenant's appends and refusals, a rebuild replays every tenant's events and answers with their
 * totals. An admin of one tenant got both, so it learned how busy the other tenants are and could
 * make every tenant's read models rebuild. They belong to the operator: admins of the default tenant.
 */
describe("attack: a tenant's admin acts on the whole service", () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
    await ledger.credentials.key('acme-admin', { tenant: 'acme', roles: ['admin'] });
    await ledger.request('POST', '/v1/sessions', { title: 'the default tenant is busy' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it.each([
    ['GET', '/metrics'],
    ['POST', '/v1/admin/rebuild'],
  ])('%s %s is a 403 for an admin of another tenant, and works for the operator', async (method, route) => {
    const refused = await ledger.request(method, route, undefined, undefined, 'acme-admin');
    expect(refused).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
    const operator = await fetch(`${ledger.baseUrl}${route}`, {
      method,
      headers: { authorization: `Bearer ${ledger.credentials.adminKey}` },
    });
    expect(operator.status).toBe(200);
  });
});
