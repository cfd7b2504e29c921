import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * `GET /v1/sessions` takes times in `from`, `to` and inside its opaque `cursor`. JavaScript's
 * Date and zod's ISO check accept times PostgreSQL refuses (a year 0000; in a cursor, a 30th of
 * February, which Date rolls over to March): they reached the query and failed there, a 500 logged
 * as a fault of the service. A reader could send them at will; each is a 400 naming its field.
 */
const cursorFor = (lastActivityAt: string) =>
  Buffer.from(JSON.stringify([lastActivityAt, 'any-session'])).toString('base64url');

describe('attack: times the session list accepts but PostgreSQL does not', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
    const opened = await ledger.request('POST', '/v1/sessions', { id: 'listed', title: 'still listed' });
    expect(opened.status).toBe(201);
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it.each([
    ['from', 'from=0000-01-01T00:00:00Z'],
    ['to', 'to=0000-06-01T00:00:00Z'],
    ['cursor', `cursor=${cursorFor('2026-02-30T00:00:00.000Z')}`],
    ['cursor', `cursor=${cursorFor('2026-04-31T12:00:00.000Z')}`],
    ['cursor', `cursor=${cursorFor('0000-01-01T00:00:00.000Z')}`],
  ])('refuses %s (%s) with a 400 naming it', async (field, query) => {
    const response = await ledger.request('GET', `/v1/sessions?${query}`);
    expect({ status: response.status, body: response.body }).toEqual({
      status: 400,
      body: { error: { code: 'invalid_request', message: expect.any(String), field } },
    });
  });

  it('still takes the earliest year PostgreSQL takes, and the cursors it hands out', async () => {
    const all = await ledger.request('GET', '/v1/sessions?from=0001-01-01T00:00:00Z&limit=1');
    expect(all.status).toBe(200);
    expect(all.body.sessions.map((session: { sessionId: string }) => session.sessionId)).toEqual(['listed']);
    const after = await ledger.request('GET', `/v1/sessions?cursor=${cursorFor(all.body.sessions[0].lastActivityAt)}`);
    expect(after.status).toBe(200);
  });
});
