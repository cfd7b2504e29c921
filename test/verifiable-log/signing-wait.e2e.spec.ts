import pg from 'pg';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { recordedWithLeaves, SIGNING_LOCK_KEY } from '../support/merkle-leaves.js';
import { probe, type Probed } from '../support/probe.js';

/**
 * Verify and export need a checkpoint covering the events they prove, and sign one when none does. Another signer
 * can hold the signing lock for minutes (a new key, or an instance back after long, checks every event since its
 * start under it). Requests must not wait on it without bound, nor take the service's connections while they wait.
 */
describe('verify while another signer holds the signing lock', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let holder: pg.Client;
  let auditor: string;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    holder = new pg.Client({ connectionString: ledger.database.connectionString });
    await Promise.all([db.connect(), holder.connect()]);
    auditor = await ledger.credentials.key('waiting-auditor', { roles: ['auditor'] });
  });
  afterAll(async () => {
    await holder?.end();
    await db?.end();
    await ledger?.close();
  });

  const asAuditor = (route: string) => probe(ledger.baseUrl, 'GET', route, { credential: auditor });

  /** A session of two events, once their leaves are added: no checkpoint covers them until one is signed. */
  const recordUnsigned = (sessionId: string) => recordedWithLeaves(ledger, db, sessionId, ['hi']);

  /** The service's backends waiting for an advisory lock. */
  async function waitingForTheLock(): Promise<number> {
    const { rows } = await db.query<{ waiting: number }>(
      `SELECT count(*)::int AS waiting FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
    );
    return rows[0].waiting;
  }

  it('answers 503 log_signing with Retry-After, one connection waiting for all of them, the rest of the service unharmed', async () => {
    await recordUnsigned('waits-1');
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
    try {
      const started = Date.now();
      const requests: Promise<Probed>[] = [
        ...Array.from({ length: 8 }, () => asAuditor('/v1/sessions/waits-1/verify')),
        asAuditor('/v1/sessions/waits-1/export'),
      ];
      // Nine requests, and the service's pool has six connections: all of them waiting would stop its consumers.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await waitingForTheLock()).toBe(1);
      const written = await ledger.request('POST', '/v1/sessions', { id: 'written-meanwhile' });
      expect(written.status).toBe(201);
      const read = await ledger.request('GET', '/v1/sessions/written-meanwhile');
      expect(read.status).toBe(200);

      const answers = await Promise.all(requests);
      const waited = Date.now() - started;
      for (const answer of answers) {
        expect(answer.status).toBe(503);
        expect(answer.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      }
      expect(answers[0].body.error.code).toBe('log_signing');
      expect(waited).toBeLessThan(15_000);
      // The one signing goes on waiting: requests stopped waiting for it, not the signer.
      expect(await waitingForTheLock()).toBe(1);
    } finally {
      await holder.query('COMMIT');
    }
    const verified = await asAuditor('/v1/sessions/waits-1/verify');
    expect(verified.status).toBe(200);
    expect(verified.body.ok).toBe(true);
  }, 30_000);

  it('shares one signing among the requests that arrive while one waits, and covers each of them', async () => {
    await recordUnsigned('waits-2');
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
    let answers: Probed[];
    try {
      const first = asAuditor('/v1/sessions/waits-2/verify');
      await recordUnsigned('waits-3');
      const later = ['waits-3', 'waits-2', 'waits-3'].map((id) => asAuditor(`/v1/sessions/${id}/verify`));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await waitingForTheLock()).toBe(1);
      await holder.query('COMMIT');
      answers = await Promise.all([first, ...later]);
    } finally {
      await holder.query('ROLLBACK');
    }
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.body.ok).toBe(true);
    }
  });
});
