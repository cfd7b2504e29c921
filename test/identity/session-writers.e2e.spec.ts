import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { probe } from '../support/probe.js';
import { keyActor } from '../support/test-credentials.js';

/**
 * A session is written by its owner and the writers the owner (or an admin) granted: another
 * producer of the tenant is refused with 403, one of another tenant finds nothing (404), and a
 * refused request appends nothing.
 */
describe('who may write to a session', () => {
  let ledger: LedgerUnderTest;
  const as = async (who: string, method: string, path: string, body?: unknown) =>
    probe(ledger.baseUrl, method, path, { credential: await ledger.credentials.key(who), body });

  beforeAll(async () => {
    ledger = await startLedger();
    await ledger.credentials.key('outsider', { tenant: 'elsewhere' });
    await ledger.credentials.key('tenant-admin', { roles: ['admin'] });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  /** A session of `owner` with a user message u1 and an assistant reply a1 that has one chunk. */
  async function ownedSession(owner: string, writers?: string[]): Promise<string> {
    const opened = await as(owner, 'POST', '/v1/sessions', { title: `${owner}'s`, ...(writers ? { writers } : {}) });
    expect(opened.status).toBe(201);
    const sessionId: string = opened.body.id;
    const messages = `/v1/sessions/${sessionId}/messages`;
    expect((await as(owner, 'POST', messages, { id: 'u1', role: 'user', content: 'hi' })).status).toBe(201);
    expect((await as(owner, 'POST', messages, { id: 'a1', role: 'assistant' })).status).toBe(201);
    const chunk = { seq: 1, type: 'llm_response_created' };
    expect((await as(owner, 'POST', `${messages}/a1/chunks`, [chunk])).status).toBe(200);
    return sessionId;
  }

  /** Every way of writing into a session: append, create a message, fork, select a branch (child and root). */
  const writes = (sessionId: string, seq: number): [string, string, unknown][] => [
    ['POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, [{ seq, type: 'text.start' }]],
    ['POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'let me in' }],
    ['POST', `/v1/sessions/${sessionId}/messages/a1/translations`, { targetLanguage: 'fr' }],
    ['POST', `/v1/sessions/${sessionId}/fork`, { messageId: 'a1' }],
    ['PUT', `/v1/sessions/${sessionId}/messages/u1/selection`, { childId: 'a1' }],
    ['PUT', `/v1/sessions/${sessionId}/selection`, { childId: 'u1' }],
  ];
  const eventsOf = async (sessionId: string) =>
    (await as('owner', 'GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events;

  it('refuses another producer of the tenant (403), one of another tenant (404), appending nothing', async () => {
    const sessionId = await ownedSession('owner');
    const before = await eventsOf(sessionId);
    for (const [method, path, body] of writes(sessionId, 2)) {
      expect({ path, ...(await as('intruder', method, path, body)) }).toMatchObject({
        path,
        status: 403,
        body: { error: { code: 'not_a_writer' } },
      });
      expect({ path, ...(await as('outsider', method, path, body)) }).toMatchObject({
        path,
        status: 404,
        body: { error: { code: expect.stringMatching(/not_found$/) } },
      });
    }
    // Nor may it fork its own session into the owner's id, or open a session under it.
    const own = await ownedSession('intruder');
    const forkInto = await as('intruder', 'POST', `/v1/sessions/${own}/fork`, { messageId: 'a1', id: sessionId });
    expect(forkInto).toMatchObject({ status: 403, body: { error: { code: 'not_a_writer' } } });
    expect(await as('intruder', 'POST', '/v1/sessions', { id: sessionId })).toMatchObject({
      status: 403,
      body: { error: { code: 'not_a_writer' } },
    });
    // Nor may it let itself in.
    const grant = await as('intruder', 'POST', `/v1/sessions/${sessionId}/writers`, { writers: ['subject:intruder'] });
    expect(grant).toMatchObject({ status: 403, body: { error: { code: 'not_a_writer' } } });
    expect(await eventsOf(sessionId)).toEqual(before);
  });

  /** `who` writes in every way, each accepted. */
  async function writesAll(who: string, sessionId: string) {
    for (const [method, path, body] of writes(sessionId, 2)) {
      const status = method === 'PUT' || path.endsWith('/chunks') ? 200 : 201;
      expect({ who, path, status: (await as(who, method, path, body)).status }).toEqual({ who, path, status });
    }
  }

  it('lets a producer write once the owner grants it, and records it as the actor', async () => {
    const sessionId = await ownedSession('owner');
    const grant = await as('owner', 'POST', `/v1/sessions/${sessionId}/writers`, { writers: ['subject:granted'] });
    expect(grant).toMatchObject({ status: 200, body: { owner: 'subject:owner', writers: ['subject:granted'] } });
    await writesAll('granted', sessionId);
    const since = (await eventsOf(sessionId)).filter(
      (event: { position: number }) => event.position > grant.body.position,
    );
    expect(since.length).toBeGreaterThanOrEqual(2);
    for (const event of since) expect(event.metadata.actor).toEqual(keyActor('granted'));
    // A writer is not an owner: it grants no one.
    const regrant = await as('granted', 'POST', `/v1/sessions/${sessionId}/writers`, { writers: ['subject:third'] });
    expect(regrant).toMatchObject({ status: 403, body: { error: { code: 'not_a_writer' } } });
  });

  it("lets the tenant's admin grant, and takes writers given at creation", async () => {
    const granted = await ownedSession('owner');
    const grant = { writers: ['subject:by-admin'] };
    const byAdmin = await as('tenant-admin', 'POST', `/v1/sessions/${granted}/writers`, grant);
    expect(byAdmin.status).toBe(200);
    await writesAll('by-admin', granted);
    await writesAll('from-the-start', await ownedSession('owner', ['subject:from-the-start']));
    // An admin of another tenant finds nothing to grant.
    const foreignAdmin = await ledger.credentials.key('foreign-admin', { tenant: 'elsewhere', roles: ['admin'] });
    const foreign = await probe(ledger.baseUrl, 'POST', `/v1/sessions/${granted}/writers`, {
      credential: foreignAdmin,
      body: { writers: ['subject:x'] },
    });
    expect(foreign).toMatchObject({ status: 404, body: { error: { code: 'session_not_found' } } });
  });
});
