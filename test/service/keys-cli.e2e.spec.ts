import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runCli, type CliRun } from '../support/ledger-cli.js';
import { freePort } from '../support/service-process.js';
import { CONNECT_RETRY_MS, expectGaveUpOn, unreachableDatabase } from '../support/unreachable-database.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * `npm run keys` is `node dist/apps/ledger/src/cli.js keys …` (`npm test` builds first): the built
 * command line on the database of a running ledger, whose keys it then lets in or out.
 */
describe('keys on the command line', () => {
  let ledger: LedgerUnderTest;
  let dataDir: string;

  const cli = (...args: string[]): Promise<CliRun> =>
    runCli(['keys', ...args], ledger.database.connectionString, dataDir);

  const get = (route: string, key: string) =>
    fetch(`${ledger.baseUrl}${route}`, { headers: { authorization: `Bearer ${key}` } }).then(
      (response) => response.status,
    );

  /** Actors of the events on a key's credential stream, straight from the log. */
  async function credentialEvents(keyId: string): Promise<{ type: string; actor: string }[]> {
    const client = new pg.Client({ connectionString: ledger.database.connectionString });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT type, actor FROM event_log_records WHERE stream_id LIKE '%' || $1 ORDER BY position`,
        [keyId],
      );
      return rows;
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    ledger = await startLedger();
    dataDir = await mkdtemp(path.join(tmpdir(), 'keys-cli-'));
  });
  afterAll(async () => {
    await ledger?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('creates a key the ledger accepts, lists it without its secret, and revokes it', async () => {
    const flags = ['--tenant', 'acme', '--roles', 'producer,reader', '--name', 'ci bot', '--subject', 'ci'];
    const created = await cli('create', ...flags);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const lines = created.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const key = JSON.parse(lines[0]);
    expect(key).toMatchObject({
      name: 'ci bot',
      tenant: 'acme',
      roles: ['producer', 'reader'],
      subject: 'ci',
      createdBy: 'system:cli',
      revokedAt: null,
      key: expect.stringMatching(/^blk_[a-z0-9]{16}_[A-Za-z0-9_-]{32}$/),
    });
    expect(await credentialEvents(key.id)).toEqual([{ type: 'credential.created', actor: 'system:cli' }]);

    // The key works over HTTP as what it is: a producer and reader of tenant acme.
    const opened = await fetch(`${ledger.baseUrl}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'from a cli key' }),
    });
    expect(opened.status).toBe(201);
    expect(await get('/v1/tool-calls', key.key)).toBe(403);

    const listed = await cli('list', '--tenant', 'acme');
    expect(listed.code).toBe(0);
    const listedKey = expect.objectContaining({ id: key.id, suffix: key.key.slice(-4) });
    expect(JSON.parse(listed.stdout).keys).toEqual([listedKey]);
    // The secret is all after `blk_<id>_`; base64url, it may itself hold `_`.
    expect(listed.stdout).not.toContain(key.key.slice(`blk_${key.id}_`.length));

    const revoked = await cli('revoke', key.id);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: key.id, revokedBy: 'system:cli' });
    expect((await credentialEvents(key.id)).map((event) => event.actor)).toEqual(['system:cli', 'system:cli']);
    // The ledger's key cache lets a revoked key through for at most a second; then it is refused.
    const deadline = Date.now() + 5_000;
    let status = await get('/v1/sessions/none', key.key);
    while (status !== 401 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      status = await get('/v1/sessions/none', key.key);
    }
    expect(status).toBe(401);
  });

  it('refuses bad arguments with one line naming the flag, before touching the database', async () => {
    const refusals: [string[], string][] = [
      [['create', '--roles', 'reader'], '--tenant is required'],
      [['create', '--tenant', 'acme'], '--roles is required'],
      [['create', '--tenant', 'acme', '--roles', 'reader,superuser'], '--roles: '],
      [['create', '--tenant', 'Not A Tenant', '--roles', 'reader'], '--tenant: '],
      [['create', '--tenant', 'acme', '--roles', 'reader', '--expires-at', 'tomorrow'], '--expires-at: '],
      [
        ['create', '--tenant', 'acme', '--roles', 'reader', '--expires-at', '2001-01-01T00:00:00Z'],
        '--expires-at: must be in the future',
      ],
      [['create', '--tenant', 'acme', '--roles', 'reader', '--role', 'admin'], "Unknown option '--role'"],
      [['revoke'], 'expected one <key id>'],
      [['list', '--tenant', 'acme/other'], '--tenant: '],
    ];
    // The database named is a listener that only counts connections: a refusal must come before any.
    let connections = 0;
    const listener = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const counted = `postgres://ledger:pw@127.0.0.1:${(listener.address() as AddressInfo).port}/ledger`;
    try {
      for (const [args, message] of refusals) {
        const run = await runCli(['keys', ...args], counted, dataDir);
        expect({ args, ...run }).toMatchObject({ args, code: 1, stdout: '' });
        expect(run.stderr).toMatch(/^block-ledger: /);
        expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringContaining(message)]);
      }
      expect({ refused: connections }).toEqual({ refused: 0 });
      // The listener does count: a command whose arguments check goes on to connect.
      expect((await runCli(['keys', 'list'], counted, dataDir, { LEDGER_CONNECT_RETRY_MS: '0' })).code).toBe(1);
      expect(connections).toBeGreaterThan(0);
    } finally {
      listener.close();
    }
  });

  it('tells an unreachable database in one line after retrying as the service does, a refused password at once', async () => {
    const { url: unreachable, port } = await unreachableDatabase();
    for (const args of [['keys', 'list'], ['rebuild']]) {
      // Warnings (the retries) on stderr: stdout is the command's JSON.
      const run = await runCli(args, unreachable, dataDir, {
        LEDGER_CONNECT_RETRY_MS: CONNECT_RETRY_MS,
        LOG_LEVEL: 'warn',
      });
      expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 1, stdout: '' });
      expectGaveUpOn(port, run.stderr);
    }
    const url = new URL(ledger.database.connectionString);
    url.password = 'not-the-password';
    const refused = await runCli(['keys', 'list'], url.toString(), dataDir, { LEDGER_CONNECT_RETRY_MS: '60000' });
    expect(refused).toEqual({
      code: 1,
      stdout: '',
      stderr: `block-ledger: DATABASE_URL: PostgreSQL at ${url.host} refused the password (28P01)\n`,
    });
  });

  it('refuses connection strings its clients cannot read at once, in one line that quotes no part of them', async () => {
    const badEscape = 'postgres://ledger:%C3%28PGSECRET@127.0.0.1:1/ledger';
    const unreadablePg = await runCli(['keys', 'list'], badEscape, dataDir, { LEDGER_CONNECT_RETRY_MS: '60000' });
    expect(unreadablePg).toEqual({
      code: 1,
      stdout: '',
      stderr: 'block-ledger: DATABASE_URL: PostgreSQL at 127.0.0.1:1 cannot be read (URI malformed)\n',
    });
    // Each command, whether it waits for EventStoreDB or not (the keys live in PostgreSQL), reads the string first.
    for (const command of [
      ['keys', 'create', '--tenant', 'acme', '--roles', 'reader'],
      ['keys', 'list'],
    ]) {
      const unreadableStore = await runCli(command, ledger.database.connectionString, dataDir, {
        EVENTSTORE_CONNECTION_STRING: 'esdb://admin:ESECRET@127.0.0.1?tls=0',
        LEDGER_CONNECT_RETRY_MS: '60000',
      });
      expect(unreadableStore).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'block-ledger: EVENTSTORE_CONNECTION_STRING: EventStoreDB at 127.0.0.1:2113 cannot be read: ' +
          'true or false expected at character 35\n',
      });
    }
  });

  it('lists keys, which live in PostgreSQL alone, while EventStoreDB is away', async () => {
    const port = await freePort();
    const listed = await runCli(['keys', 'list', '--tenant', 'acme'], ledger.database.connectionString, dataDir, {
      EVENTSTORE_CONNECTION_STRING: `esdb://127.0.0.1:${port}?tls=false`,
      LEDGER_CONNECT_RETRY_MS: '60000',
    });
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(listed.stdout)).toEqual({ keys: expect.any(Array) });
  });

  it('says so in one line when the key to revoke does not exist', async () => {
    const run = await cli('revoke', 'abcdefabcdef0000');
    expect(run).toMatchObject({ code: 1, stdout: '', stderr: 'block-ledger: no such key\n' });
  });
});
