import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { probe } from '../support/probe.js';

/**
 * Verifying a session while it is written: an event appended between reading the stream and reading
 * its leaves has a leaf but was not read. It is not missing, and a healthy log must not look tampered.
 */
describe('verifying a session being written', () => {
  let ledger: LedgerUnderTest;
  let auditor: string;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '200' });
    auditor = await ledger.credentials.key('live-auditor', { roles: ['auditor'] });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('reports no break for events appended while it verifies', async () => {
    expect((await ledger.request('POST', '/v1/sessions', { id: 'live' })).status).toBe(201);
    const breaks: unknown[] = [];
    for (let i = 0; i < 40; i++) {
      const [created, verified] = await Promise.all([
        ledger.request('POST', '/v1/sessions/live/messages', { role: 'user', content: `message ${i}` }),
        probe(ledger.baseUrl, 'GET', '/v1/sessions/live/verify', { credential: auditor }),
      ]);
      expect([created.status, verified.status]).toEqual([201, 200]);
      if (!verified.body.ok) breaks.push(verified.body.firstBroken);
    }
    expect(breaks).toEqual([]);
  });
});
