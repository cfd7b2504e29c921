import { createPostgresEventLog, type EventLog } from '#event-log';
import pg from 'pg';
import { ApiKeyStore } from '../../apps/ledger/src/identity/api-key-store.js';
import { Authenticator } from '../../apps/ledger/src/identity/authenticator.js';
import { CredentialWatch } from '../../apps/ledger/src/identity/credential-watch.js';
import { eventually } from '../support/probe.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const ROUTE = 'GET /v1/events/live';

/**
 * The watch on an open feed's credential, with the real key store on PostgreSQL: a change the store
 * heard before the feed's watch began still ends the feed, at once rather than at the next periodic check.
 */
describe('the credential watch', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let eventLog: EventLog;
  let keys: ApiKeyStore;
  let watch: CredentialWatch;

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = new pg.Pool({ connectionString: database.connectionString, max: 4 });
    eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
    keys = new ApiKeyStore(pool, eventLog);
    await keys.onModuleInit();
    watch = new CredentialWatch(new Authenticator(keys), keys);
  });
  afterAll(async () => {
    watch?.onModuleDestroy();
    await keys?.onModuleDestroy();
    await eventLog?.close();
    await pool?.end();
    await database?.drop();
  });

  /** A request presenting `key` as Node would hand it over. */
  const carrying = (key: string) => ({
    headers: { authorization: `Bearer ${key}` },
    rawHeaders: ['authorization', `Bearer ${key}`],
  });

  async function auditorKey(name: string) {
    const created = await keys.create({ name, tenant: 'default', roles: ['auditor'] }, 'system:test');
    return { ...created, principal: await keys.verify(created.key) };
  }

  it('ends a feed whose key was revoked while it opened, and keeps one whose key stands', async () => {
    const revoked = await auditorKey('revoked-while-opening');
    const standing = await auditorKey('standing');
    // The guard let both in; the revocation lands before the feed's watch begins.
    await keys.revoke(revoked.id, undefined, 'system:test');
    const ended: string[] = [];
    const stops = [revoked, standing].map(({ key, principal, name }) =>
      watch.watch(carrying(key), ROUTE, principal, () => ended.push(name)),
    );
    await eventually('the revoked key is ended', async () => (ended.length > 0 ? true : undefined), 3_000);
    expect(ended).toEqual(['revoked-while-opening']);
    // Another key's change ends nothing else.
    await keys.revoke((await auditorKey('unrelated')).id, undefined, 'system:test');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(ended).toEqual(['revoked-while-opening']);
    for (const stop of stops) stop();
  });

  it('ends a feed whose credential no longer holds the route, or is presented for another tenant', async () => {
    const { key, principal } = await auditorKey('no-longer-an-auditor');
    const ended: string[] = [];
    watch.watch(carrying(key), 'GET /metrics', principal, () => ended.push('role'));
    watch.watch(carrying(key), ROUTE, { ...principal, tenant: 'acme' }, () => ended.push('tenant'));
    await eventually('both are ended', async () => (ended.length === 2 ? true : undefined), 3_000);
    expect(ended.sort()).toEqual(['role', 'tenant']);
  });
});
