import { rm } from 'node:fs/promises';
import pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { runCli } from '../support/ledger-cli.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually } from '../support/probe.js';

/**
 * The instance lock (decision 0051): every running instance holds it shared, so that `cli.js log-repair` runs only
 * with every instance stopped. Found by the second attack review: each lost connection doubled the instance's
 * shares, which outlived shutdown; a connection cut half-open freed the share unseen, for good.
 */
const SHARES = `SELECT a.pid, a.client_port FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  WHERE l.locktype = 'advisory' AND l.mode = 'ShareLock' AND l.granted
    AND ((l.classid::bigint << 32) | l.objid::bigint) = 7318201018
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

async function sharesOn(db: pg.Client): Promise<{ pid: number; client_port: number }[]> {
  return (await db.query<{ pid: number; client_port: number }>(SHARES)).rows;
}

describe('the instance lock after its backend is terminated (a restart of PostgreSQL)', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let dataDir: string;
  let closed = false;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' });
    dataDir = ledger.app.get<LedgerConfig>(LEDGER_CONFIG).dataDir;
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    if (!closed) return ledger?.close();
    await ledger.database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is held once again after each drop, and by no one once the instance stopped', async () => {
    expect(await sharesOn(db)).toHaveLength(1);
    for (let drop = 0; drop < 3; drop++) {
      const [{ pid }] = await sharesOn(db);
      await db.query('SELECT pg_terminate_backend($1)', [pid]);
      const again = await eventually('the share taken again', async () => {
        const shares = await sharesOn(db);
        return shares.length > 0 && shares[0].pid !== pid ? shares : undefined;
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await sharesOn(db)).toEqual(again);
    }
    await ledger.app.close();
    closed = true;
    expect(await sharesOn(db)).toEqual([]);
    const run = await runCli(['log-repair'], ledger.database.connectionString, dataDir);
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toMatchObject({ dropped: '0', removed: 0 });
  }, 30_000);
});

describe('the instance lock on a connection cut half-open (a failover, a NAT that dropped its state)', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' }, { proxied: true });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await ledger?.close();
  });

  it('is found lost within seconds, and the share taken again on a new connection', async () => {
    const [held] = await sharesOn(db);
    ledger.proxy!.cut(held.client_port);
    // With a timeout it returns once the backend has gone: its share with it (it only signals otherwise).
    await db.query('SELECT pg_terminate_backend($1, 10000)', [held.pid]);
    expect(await sharesOn(db)).toEqual([]);
    const again = await eventually(
      'the share taken again',
      async () => {
        const shares = await sharesOn(db);
        return shares.length > 0 ? shares : undefined;
      },
      15_000,
    );
    expect(again).toHaveLength(1);
    expect(again[0].pid).not.toBe(held.pid);
  }, 30_000);
});
