import { rm } from 'node:fs/promises';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { freePort, reachableTempDir, startService } from '../support/service-process.js';

/**
 * A startup error names the database by its address, never its credentials. PostgreSQL's client
 * takes a password holding `@` as written (`postgres://ledger:p@ss@host/db`: the last `@` ends
 * it), but the address was cut after the first `@`, so the rest of the password was printed on
 * the error line and on every logged retry.
 */
const PASSWORD_TAIL = 'tail-of-the-password';
const PASSWORD = `s3cr@${PASSWORD_TAIL}`;

describe('attack: a DATABASE_URL password holding @ printed on startup', () => {
  let database: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  beforeEach(async () => {
    dataDir = await reachableTempDir('connection-secrets');
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });
  afterAll(async () => {
    await database?.drop();
  });

  async function failedStart(env: Record<string, string>): Promise<string> {
    const service = startService({ PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, ...env });
    expect(await service.exited).toBe(1);
    return service.output();
  }

  it('a refused password: the line names the host only', async () => {
    const { host, pathname } = new URL(database.connectionString);
    const output = await failedStart({ DATABASE_URL: `postgres://ledger:${PASSWORD}@${host}${pathname}` });
    expect(output).toBe(`block-ledger: DATABASE_URL: PostgreSQL at ${host} refused the password (28P01)\n`);
  });

  it('an unreachable database: neither the retries logged nor the last line quote it', async () => {
    const port = await freePort();
    const output = await failedStart({
      DATABASE_URL: `postgres://ledger:${PASSWORD}@127.0.0.1:${port}/ledger`,
      LEDGER_CONNECT_RETRY_MS: '300',
    });
    expect(output).toContain(`PostgreSQL at 127.0.0.1:${port} did not answer`);
    expect(output).not.toContain(PASSWORD_TAIL);
  });
});
