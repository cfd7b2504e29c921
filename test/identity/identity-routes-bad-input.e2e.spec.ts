import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * Bad input on the identity routes (keys, writers): a 400 naming the field, and nothing made,
 * revoked or granted. Who may call them at all is walked in permission-table.e2e.spec.ts.
 */
describe('bad input on the key and writer routes', () => {
  let ledger: LedgerUnderTest;
  const asAdmin = (method: string, route: string, body?: unknown) =>
    ledger.request(method, route, body, undefined, 'admin');
  const keyCount = async () => (await asAdmin('GET', '/v1/admin/keys')).body.keys.length as number;

  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(() => ledger.close());

  const newKeyCases: [string, unknown, string][] = [
    ['no name', { roles: ['reader'] }, 'name'],
    ['a name with a colon (actors are key:<id>:<name>)', { name: 'a:b', roles: ['reader'] }, 'name'],
    ['a name holding NUL', { name: 'a\u0000b', roles: ['reader'] }, 'name'],
    ['a name of 101 characters', { name: 'n'.repeat(101), roles: ['reader'] }, 'name'],
    ['no roles', { name: 'k', roles: [] }, 'roles'],
    ['an unknown role', { name: 'k', roles: ['root'] }, 'roles.0'],
    ['roles as a string', { name: 'k', roles: 'admin' }, 'roles'],
    ['a tenant in capitals', { name: 'k', roles: ['reader'], tenant: 'Acme' }, 'tenant'],
    ['a tenant holding /', { name: 'k', roles: ['reader'], tenant: 'a/b' }, 'tenant'],
    ['a subject with a space', { name: 'k', roles: ['reader'], subject: 'alice smith' }, 'subject'],
    [
      'a token subject without its sub',
      { name: 'k', roles: ['reader'], subject: 'jwt:https://idp.example' },
      'subject',
    ],
    ['a name posing as a token subject', { name: 'k', roles: ['reader'], subject: 'jwt:alice' }, 'subject'],
    ['a token subject with a NUL', { name: 'k', roles: ['reader'], subject: 'jwt:https://idp#a\u0000b' }, 'subject'],
    ['an expiry in the past', { name: 'k', roles: ['reader'], expiresAt: '2020-01-01T00:00:00Z' }, 'expiresAt'],
    ['an expiry that is no date', { name: 'k', roles: ['reader'], expiresAt: 'tomorrow' }, 'expiresAt'],
    ['a field the route does not take', { name: 'k', roles: ['reader'], secret: 'chosen' }, 'secret'],
  ];
  it.each(newKeyCases)(
    'POST /v1/admin/keys with %s is refused naming the field, and makes no key',
    async (_label, body, field) => {
      const before = await keyCount();
      const refused = await asAdmin('POST', '/v1/admin/keys', body);
      expect(refused).toMatchObject({ status: 400, body: { error: { field } } });
      expect(await keyCount()).toBe(before);
    },
  );

  it('POST /v1/admin/keys with a body that is no object is refused', async () => {
    const before = await keyCount();
    for (const body of ['[]', '"key"', '42']) {
      expect((await asAdmin('POST', '/v1/admin/keys', body)).status).toBe(400);
    }
    expect(await keyCount()).toBe(before);
  });

  it('GET /v1/admin/keys refuses a malformed tenant and unknown parameters', async () => {
    expect(await asAdmin('GET', '/v1/admin/keys?tenant=Not%20A%20Tenant')).toMatchObject({
      status: 400,
      body: { error: { field: 'tenant' } },
    });
    expect(await asAdmin('GET', '/v1/admin/keys?colour=red')).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request' } },
    });
  });

  it('DELETE /v1/admin/keys/:id refuses an id no key can have, 404s an unknown one, and revokes once', async () => {
    expect(await asAdmin('DELETE', '/v1/admin/keys/acme%2Fkey')).toMatchObject({
      status: 400,
      body: { error: { field: 'id' } },
    });
    expect(await asAdmin('DELETE', '/v1/admin/keys/0000000000000000')).toMatchObject({
      status: 404,
      body: { error: { code: 'key_not_found' } },
    });
    const made = await asAdmin('POST', '/v1/admin/keys', { name: 'short-lived', roles: ['reader'] });
    const first = await asAdmin('DELETE', `/v1/admin/keys/${made.body.id}`);
    const again = await asAdmin('DELETE', `/v1/admin/keys/${made.body.id}`);
    expect(first.status).toBe(200);
    // A second revocation changes nothing: same revocation time.
    expect(again).toMatchObject({ status: 200, body: { revokedAt: first.body.revokedAt } });
  });

  it('POST /v1/sessions/:sid/writers refuses what is no list of subjects, naming the field, and grants nothing', async () => {
    const sessionId = (await ledger.request('POST', '/v1/sessions', {})).body.id as string;
    const route = `/v1/sessions/${sessionId}/writers`;
    const cases: [unknown, string][] = [
      [{}, 'writers'],
      [{ writers: [] }, 'writers'],
      [{ writers: 'subject:bob' }, 'writers'],
      [{ writers: ['bob'] }, 'writers.0'],
      [{ writers: ['subject:bo\u0000b'] }, 'writers.0'],
      [{ writers: Array.from({ length: 101 }, (_, index) => `subject:w${index}`) }, 'writers'],
      [{ writers: ['subject:bob'], owner: 'subject:mallory' }, 'owner'],
    ];
    for (const [body, field] of cases) {
      const refused = await ledger.request('POST', route, body);
      expect({ body, status: refused.status, field: refused.body.error?.field }).toEqual({ body, status: 400, field });
    }
    expect(
      await ledger.request('POST', `/v1/sessions/acme%2F${sessionId}/writers`, { writers: ['subject:bob'] }),
    ).toMatchObject({
      status: 400,
      body: { error: { field: 'sid' } },
    });
    // Nothing was granted: the session's events are its opening alone.
    const events = await ledger.request('GET', `/v1/sessions/${sessionId}/events`);
    expect(events.body.events.map((event: { type: string }) => event.type)).toEqual(['session.opened']);
  });
});
