import { randomBytes } from 'node:crypto';
import { createPostgresEventLog, databaseFailure, type EventLog } from '#event-log';
import pg from 'pg';
import { ApiKeyStore } from '../../apps/ledger/src/identity/api-key-store.js';
import { AuthenticationError } from '../../apps/ledger/src/identity/principal.js';
import { CuttableProxy } from '../support/cuttable-proxy.js';
import { eventually } from '../support/probe.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

/** A pool that counts the statements sent to PostgreSQL. */
class CountingPool extends pg.Pool {
  statements = 0;
  override query(...args: unknown[]): never {
    this.statements += 1;
    return (super.query as (...forwarded: unknown[]) => never)(...args);
  }
}

describe('the API key store under a flood of invented keys', () => {
  let database: TestDatabase;
  let pool: CountingPool;
  let eventLog: EventLog;
  let keys: ApiKeyStore;

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = new CountingPool({ connectionString: database.connectionString, max: 4 });
    eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
    keys = new ApiKeyStore(pool, eventLog);
  });
  afterAll(async () => {
    await eventLog?.close();
    await pool?.end();
    await database?.drop();
  });

  it('keeps real keys cached however many unknown ids are tried, and asks the database once per unknown id a second', async () => {
    const { key } = await keys.create({ name: 'real', tenant: 'default', roles: ['producer'] }, 'system:test');
    const now = Date.now();
    await keys.verify(key, now);
    const invented = Array.from(
      { length: 10_050 },
      () => `blk_${randomBytes(8).toString('hex')}_${randomBytes(24).toString('base64url')}`,
    );
    for (const token of invented) await expect(keys.verify(token, now)).rejects.toBeInstanceOf(AuthenticationError);
    // The same invented id again within the second: no second lookup.
    const before = pool.statements;
    await expect(keys.verify(invented.at(-1)!, now)).rejects.toMatchObject({ reason: 'unknown' });
    expect(pool.statements).toBe(before);
    // The real key is still served from the cache: no statement at all.
    expect((await keys.verify(key, now)).actor).toMatch(/^key:[a-z0-9]{16}:real$/);
    expect(pool.statements).toBe(before);
  });
});

describe('verified keys cached on several instances of one database', () => {
  let database: TestDatabase;
  let pools: CountingPool[];
  let eventLog: EventLog;
  let instances: ApiKeyStore[];
  let sql: pg.Client;

  /** What an instance answers for a key at `now`: the actor, or why it refused. */
  const outcome = (store: ApiKeyStore, key: string, now: number) =>
    store.verify(key, now).then(
      (principal) => principal.actor,
      (error: AuthenticationError) => error.reason,
    );

  beforeAll(async () => {
    database = await createTestDatabase();
    eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
    pools = [0, 1].map(() => new CountingPool({ connectionString: database.connectionString, max: 4 }));
    instances = pools.map((pool) => new ApiKeyStore(pool, eventLog));
    for (const store of instances) await store.onModuleInit();
    sql = new pg.Client({ connectionString: database.connectionString });
    await sql.connect();
  });
  afterAll(async () => {
    for (const store of instances ?? []) await store.onModuleDestroy();
    await sql?.end();
    await eventLog?.close();
    for (const pool of pools ?? []) await pool.end();
    await database?.drop();
  });

  it('refuses a key revoked on another instance while its cached entry is still fresh', async () => {
    const [first, second] = instances;
    const created = await second.create({ name: 'agent', tenant: 'default', roles: ['producer'] }, 'system:test');
    // One clock reading for every check on the first instance: its entry never ages, only a notification can drop it.
    const now = Date.now();
    expect(await outcome(first, created.key, now)).toBe(`key:${created.id}:agent`);
    // The creation's notification may still be on its way (dropping the entry once): then cached, the key is checked
    // with no statement.
    await eventually('a check from the cache', async () => {
      const before = pools[0].statements;
      expect(await outcome(first, created.key, now)).toBe(`key:${created.id}:agent`);
      return pools[0].statements === before ? true : undefined;
    });

    await second.revoke(created.id, 'default', 'system:test');
    await eventually('the first instance refuses the revoked key', async () =>
      (await outcome(first, created.key, now)) === 'revoked' ? true : undefined,
    );
  });

  it('hears a change made outside the service, by SQL, as well', async () => {
    const [first, second] = instances;
    const created = await second.create({ name: 'ops', tenant: 'default', roles: ['producer'] }, 'system:test');
    const now = Date.now();
    expect(await outcome(first, created.key, now)).toBe(`key:${created.id}:ops`);
    await sql.query(`UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1`, [created.id]);
    await eventually('the first instance refuses the expired key', async () =>
      (await outcome(first, created.key, now)) === 'expired' ? true : undefined,
    );
  });

  it('is not told of a key merely being used: last_used_at alone notifies no one', async () => {
    const created = await instances[0].create({ name: 'used', tenant: 'default', roles: ['producer'] }, 'system:test');
    const listener = new pg.Client({ connectionString: database.connectionString });
    await listener.connect();
    try {
      const heard: string[] = [];
      listener.on('notification', ({ payload }) => heard.push(payload ?? ''));
      await listener.query('LISTEN api_key_changed');
      await sql.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [created.id]);
      // Notifications arrive in commit order: had the update notified, it would come before this one.
      await sql.query(`NOTIFY api_key_changed, 'sentinel'`);
      await eventually('the sentinel notification', async () => (heard.length > 0 ? true : undefined));
      expect(heard[0]).toBe('sentinel');
    } finally {
      await listener.end();
    }
  });

  it('reads every key again after its listening connection was lost, since changes may have gone unheard', async () => {
    const [first] = instances;
    const created = await first.create({ name: 'gap', tenant: 'default', roles: ['producer'] }, 'system:test');
    const now = Date.now();
    expect(await outcome(first, created.key, now)).toBe(`key:${created.id}:gap`);
    // A change nobody hears (triggers off for this connection), while the listener is being cut off.
    // This database's listeners only: suites running at the same time share the PostgreSQL server.
    const { rowCount: cutOff } = await sql.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN api_key_changed'`,
    );
    expect(cutOff).toBeGreaterThan(0);
    await sql.query(`SET session_replication_role = replica`);
    await sql.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [created.id]);
    await sql.query(`SET session_replication_role = DEFAULT`);
    await eventually('the first instance refuses the key revoked unheard', async () =>
      (await outcome(first, created.key, now)) === 'revoked' ? true : undefined,
    );
  });
});

/**
 * The key's row and its record in the log are written apart (the store's pool, then the log's): the second
 * review of round 37 had the log refuse the record while the row was stored, and the admin told "nothing was done".
 */
describe('keys when the log cannot record them', () => {
  let database: TestDatabase;
  let proxy: CuttableProxy;
  let pool: pg.Pool;
  let eventLog: EventLog;
  let keys: ApiKeyStore;
  beforeAll(async () => {
    database = await createTestDatabase();
    const proxied = await CuttableProxy.before(database.connectionString);
    proxy = proxied.proxy;
    pool = new pg.Pool({ connectionString: database.connectionString, max: 2 });
    eventLog = await createPostgresEventLog({ connectionString: proxied.connectionString, connectTimeoutMs: 500 });
    keys = new ApiKeyStore(pool, eventLog);
  });
  afterAll(async () => {
    await eventLog?.close();
    await proxy?.close();
    await pool?.end();
    await database?.drop();
  });

  it('keeps no key whose creation the log refused, and says a revocation is in effect though unrecorded', async () => {
    const kept = await keys.create({ name: 'kept', tenant: 'default', roles: ['producer'] }, 'system:test');
    proxy.mode = 'refuse';
    proxy.resetAll();
    const refused = await keys
      .create({ name: 'refused', tenant: 'default', roles: ['producer'] }, 'system:test')
      .catch((error: unknown) => error);
    // The first statement after the reset may go on a pooled connection not yet known to be gone.
    expect(databaseFailure(refused)).toMatch(/^(unavailable|lost)$/);
    const revoked = await keys.revoke(kept.id, undefined, 'system:test').catch((error: unknown) => error);
    expect(revoked).toMatchObject({ status: 503, code: 'revocation_unrecorded' });
    const { rows } = await pool.query<{ name: string; revoked: boolean }>(
      'SELECT name, revoked_at IS NOT NULL AS revoked FROM api_keys ORDER BY name',
    );
    expect(rows).toEqual([{ name: 'kept', revoked: true }]);

    proxy.mode = 'forward';
    await eventually('the revocation recorded on a second try', () =>
      keys.revoke(kept.id, undefined, 'system:test').then(
        () => true,
        () => undefined,
      ),
    );
    const { events } = await eventLog.readAll({ fromPosition: 0n });
    expect(events.map((event) => event.type)).toEqual(['credential.created', 'credential.revoked']);
  });

  it('records a key before its row: a row that cannot be written leaves a record closed by a revocation', async () => {
    // Round 38's review: the row was written first, and when the log refused the record, the delete could time out
    // too (a lock held on the table), leaving a key in effect that the log never heard of.
    await pool.query(`CREATE FUNCTION refuse_insert() RETURNS trigger LANGUAGE plpgsql AS
                        $$ BEGIN RAISE EXCEPTION 'inserts refused' USING ERRCODE = 'query_canceled'; END $$`);
    await pool.query(
      'CREATE TRIGGER refuse_insert BEFORE INSERT ON api_keys FOR EACH ROW EXECUTE FUNCTION refuse_insert()',
    );
    const before = await eventually('the log read on connections of its own again', () =>
      eventLog.readAll({ fromPosition: 0n }).then(
        ({ events }) => events.length,
        () => undefined,
      ),
    );
    try {
      const refused = await keys
        .create({ name: 'unwritten', tenant: 'default', roles: ['producer'] }, 'system:test')
        .catch((error: unknown) => error);
      // Refused as a statement cancelled for its time would be: the caller is told what was recorded.
      expect(refused).toMatchObject({
        status: 503,
        code: 'key_not_stored',
        message:
          "the key's creation was recorded, but the key could not be stored, so it never worked; its record is revoked: " +
          'create another',
      });
    } finally {
      await pool.query('DROP TRIGGER refuse_insert ON api_keys');
    }
    expect((await pool.query(`SELECT 1 FROM api_keys WHERE name = 'unwritten'`)).rowCount).toBe(0);
    const recorded = (await eventLog.readAll({ fromPosition: 0n })).events.slice(before);
    expect(recorded.map(({ type, data }) => ({ type, name: (data as { name?: string }).name }))).toEqual([
      { type: 'credential.created', name: 'unwritten' },
      { type: 'credential.revoked', name: undefined },
    ]);
    expect(new Set(recorded.map(({ data }) => (data as { keyId: string }).keyId)).size).toBe(1);

    const made = await keys.create(
      { name: 'made', tenant: 'default', roles: ['producer'], expiresAt: '2099-01-01T00:00:00+02:00' },
      'system:test',
    );
    const { events } = await eventLog.readAll({ fromPosition: 0n });
    // The record says what the table holds.
    expect(events.at(-1)!.data).toEqual({
      keyId: made.id,
      name: 'made',
      roles: ['producer'],
      subject: null,
      expiresAt: made.expiresAt,
    });
    expect(made.expiresAt).toBe('2098-12-31T22:00:00.000Z');
  });
});
