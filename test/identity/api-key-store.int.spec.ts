import { randomBytes } from 'node:crypto';
import { createPostgresEventLog, type EventLog } from '#event-log';
import pg from 'pg';
import { ApiKeyStore } from '../../apps/ledger/src/identity/api-key-store.js';
import { AuthenticationError } from '../../apps/ledger/src/identity/principal.js';
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
