import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { EventLog } from '#event-log';
import pg from 'pg';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { leavesAdded, recordedWithLeaves, SIGNING_LOCK_KEY } from '../support/merkle-leaves.js';
import { eventually, probe, type Probed } from '../support/probe.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { registerCredentials, TestCredentials } from '../support/test-credentials.js';
import { CuttableProxy } from '../support/cuttable-proxy.js';

/** The backends of the current database waiting for the signing lock, and their sessions. */
const SIGNING_LOCK_WAITS = `FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  WHERE l.locktype = 'advisory' AND NOT l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = ${SIGNING_LOCK_KEY}
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

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

  /** The service's backends waiting for the signing lock (in this test's database: suites run side by side). */
  async function waitingForTheLock(): Promise<number> {
    const { rows } = await db.query<{ waiting: number }>(`SELECT count(*)::int AS waiting ${SIGNING_LOCK_WAITS}`);
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

/**
 * Found by the attack review of decision 0051: with one signing shared by every caller, a signing stuck on a
 * half-open connection stopped every later verify (503 log_signing) and every periodic checkpoint for as long as
 * the process ran. The next signing now starts beside one that has run SIGNING_LOCK_WAIT_MS (10 s).
 */
describe('a signing stuck on a half-open connection', () => {
  let database: TestDatabase;
  let proxy: CuttableProxy;
  let app: INestApplication | undefined;
  let dataDir: string;
  let direct: pg.Client;
  let holder: pg.Client;
  let baseUrl: string;
  let credential: string;
  let first: Promise<Probed> | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    const proxied = await CuttableProxy.before(database.connectionString);
    proxy = proxied.proxy;
    dataDir = await mkdtemp(path.join(tmpdir(), 'stuck-signing-'));
    const config = loadConfig({
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      LEDGER_DATA_DIR: dataDir,
      LEDGER_CHECKPOINT_INTERVAL_MS: '600000',
    });
    app = await createLedgerApp({ config, connectionString: proxied.connectionString });
    await app.listen(0, '127.0.0.1');
    baseUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    const credentials = registerCredentials(await TestCredentials.fromDataDir(baseUrl, dataDir));
    credential = await credentials.key('stuck-client');
    direct = new pg.Client({ connectionString: database.connectionString });
    holder = new pg.Client({ connectionString: database.connectionString });
    await Promise.all([direct.connect(), holder.connect()]);
  });
  afterAll(async () => {
    // Every proxied socket destroyed: the stuck client errors, and the app can close.
    await proxy?.close();
    await first?.catch(() => undefined);
    await app?.close();
    await holder?.end();
    await direct?.end();
    await database?.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  const call = (method: string, route: string, body?: unknown) =>
    probe(baseUrl, method, route, { credential, ...(body === undefined ? {} : { body }) });

  async function record(sessionId: string): Promise<void> {
    expect((await call('POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
    const events = await app!.get<EventLog>(EVENT_LOG).readStream(`session-${sessionId}`);
    await leavesAdded(
      direct,
      events.map((event) => event.position),
    );
  }

  it('does not hold up the next signing: verify signs again on a working connection', async () => {
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1)', [SIGNING_LOCK_KEY]);
    await record('before-the-cut');
    first = call('GET', '/v1/sessions/before-the-cut/verify');
    const waiter = await eventually('a signing waits for the lock', async () => {
      const { rows } = await direct.query<{ pid: number; client_port: number }>(
        `SELECT a.pid, a.client_port ${SIGNING_LOCK_WAITS}`,
      );
      return rows[0];
    });
    // The database side of that connection goes away (a failover, a crash of its backend); the service's does not.
    proxy.cut(waiter.client_port);
    await direct.query('SELECT pg_terminate_backend($1)', [waiter.pid]);
    await holder.query('COMMIT');

    await record('after-the-cut');
    const answers: Probed[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const answer = await call('GET', '/v1/sessions/after-the-cut/verify');
      answers.push(answer);
      if (answer.status === 200) break;
      expect(answer.body.error.code).toBe('log_signing');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    expect(answers.at(-1)!.status).toBe(200);
    expect(answers.at(-1)!.body).toMatchObject({ ok: true });
  }, 60_000);
});
