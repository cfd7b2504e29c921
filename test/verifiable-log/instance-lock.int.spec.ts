import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { within } from '../../apps/ledger/src/projections/projection-runner.js';
import { InstanceLock } from '../../apps/ledger/src/verifiable-log/instance-lock.js';
import { CuttableProxy } from '../support/cuttable-proxy.js';
import { eventually } from '../support/probe.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/**
 * The instance lock through the faults of a network (third attack review of decision 0051): a connection cut
 * half-open at shutdown, a server that stops answering for a while, a repair holding the lock, a server refusing
 * connections. Each time the instance holds exactly one share again, and none once released.
 */
const KEY = 7318201018;
/** A fifth of the service's: each fault lasts as many of the lock's checks and retries, in a fifth of the time. */
const TIMING = { answerMs: 1_000, retryMs: 200 };
/** Watched after the share is taken again, about three of the lock's retries: a second share would show. */
const SECOND_SHARE_WINDOW_MS = 3 * TIMING.retryMs;
/** How soon after a release the share is gone (the server ends the backend at once). */
const RELEASED_WITHIN_MS = 500;
const LOCKS = `SELECT a.pid, a.client_port, l.granted FROM pg_locks l JOIN pg_stat_activity a USING (pid)
  WHERE l.locktype = 'advisory' AND l.mode = 'ShareLock'
    AND ((l.classid::bigint << 32) | l.objid::bigint) = ${KEY}
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`;

/** 'settled' if `promise` settles, either way, within `ms`, else 'hung'. */
const settlesWithin = async (promise: Promise<unknown>, ms: number): Promise<'settled' | 'hung'> =>
  (await within(
    promise.then(
      () => true,
      () => true,
    ),
    ms,
  ))
    ? 'settled'
    : 'hung';

describe('the instance lock through network faults', () => {
  let database: TestDatabase;
  let proxy: CuttableProxy;
  let proxied: string;
  let db: pg.Client;
  const lost: Error[] = [];
  let waits = 0;
  const events = { lost: (error: Error) => lost.push(error), waiting: () => (waits += 1) };

  beforeEach(async () => {
    database = await createTestDatabase();
    ({ proxy, connectionString: proxied } = await CuttableProxy.before(database.connectionString));
    db = new pg.Client({ connectionString: database.connectionString });
    await db.connect();
    lost.length = 0;
    waits = 0;
  });
  afterEach(async () => {
    await proxy.close();
    await db.end();
    await database.drop();
  });

  const locks = async () => (await db.query<{ pid: number; client_port: number; granted: boolean }>(LOCKS)).rows;
  /** Once the lock is held again: one granted share, and never a second one while it is watched. */
  const shareTaken = async () => {
    await eventually('the share taken again', async () =>
      (await locks()).some((row) => row.granted) ? true : undefined,
    );
    for (const until = Date.now() + SECOND_SHARE_WINDOW_MS; Date.now() < until; await sleep(100))
      expect((await locks()).filter((row) => row.granted)).toHaveLength(1);
  };
  /** Released: no share left, as soon as the server has ended the backend. */
  const sharesGone = () =>
    eventually('no share left', async () => ((await locks()).length === 0 ? true : undefined), RELEASED_WITHIN_MS);

  it('is released at shutdown even when its connection was just cut half-open', async () => {
    const lock = new InstanceLock(proxied, events, TIMING);
    await lock.take();
    const [held] = await locks();
    proxy.cut(held.client_port);
    expect(await settlesWithin(lock.release(), 3 * TIMING.retryMs)).toBe('settled');
  }, 20_000);

  it('sees a held connection cut half-open while it runs, and takes the share again on a new one', async () => {
    const lock = new InstanceLock(proxied, events, TIMING);
    await lock.take();
    const [held] = await locks();
    // The server's side ends (the share is freed there); the lock's socket stays open and hears nothing.
    proxy.cut(held.client_port);
    await sharesGone();
    await shareTaken();
    const [again] = await locks();
    expect(again.client_port).not.toBe(held.client_port);
    expect(lost.map((error) => error.message)).toEqual([
      `the instance lock's connection did not answer in ${TIMING.answerMs} ms`,
    ]);
    expect(await settlesWithin(lock.release(), 3 * TIMING.retryMs)).toBe('settled');
    await sharesGone();
  }, 20_000);

  it('is taken again once a server that stopped answering answers, and then released', async () => {
    const lock = new InstanceLock(proxied, events, TIMING);
    await lock.take();
    const [held] = await locks();
    proxy.mode = 'mute';
    await db.query('SELECT pg_terminate_backend($1)', [held.pid]);
    await sleep(8 * TIMING.retryMs);
    proxy.mode = 'forward';
    proxy.endMuted();
    await shareTaken();
    expect(await settlesWithin(lock.release(), 3 * TIMING.retryMs)).toBe('settled');
    await sharesGone();
  }, 30_000);

  it('waits for a repair holding the lock without queueing a backend, says so once, and takes the share after', async () => {
    const lock = new InstanceLock(database.connectionString, events, TIMING);
    await lock.take();
    const [held] = await locks();
    const repair = new pg.Client({ connectionString: database.connectionString });
    await repair.connect();
    try {
      await db.query('SELECT pg_terminate_backend($1)', [held.pid]);
      await repair.query('SELECT pg_advisory_lock($1)', [KEY]);
      await sleep(8 * TIMING.retryMs);
      expect(await locks()).toEqual([]);
      expect(waits).toBe(1);
      await repair.query('SELECT pg_advisory_unlock($1)', [KEY]);
      await shareTaken();
    } finally {
      await repair.end();
      await lock.release();
    }
    await sharesGone();
  }, 30_000);

  it('is taken again after the server refused connections for a while: one share, none after release', async () => {
    const lock = new InstanceLock(proxied, events, TIMING);
    await lock.take();
    const [held] = await locks();
    proxy.mode = 'refuse';
    await db.query('SELECT pg_terminate_backend($1)', [held.pid]);
    await sleep(4 * TIMING.retryMs);
    proxy.mode = 'forward';
    await shareTaken();
    expect(await locks()).toHaveLength(1);
    expect(await settlesWithin(lock.release(), 3 * TIMING.retryMs)).toBe('settled');
    await sharesGone();
  }, 30_000);
});
