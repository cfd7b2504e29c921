import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from '../support/probe.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { freePort, reachableTempDir, startService, waitUntilHealthy } from '../support/service-process.js';
import { CONNECT_RETRY_MS, expectGaveUpOn, unreachableDatabase } from '../support/unreachable-database.js';

/**
 * Every configuration error stops the built service with one line naming the variable, the file
 * (as the variable gives it) and the problem: nothing else is printed, no stack, nothing left
 * running. Unreachable databases are retried for LEDGER_CONNECT_RETRY_MS first, each retry logged.
 */
describe('the service stops on a configuration error with one line', () => {
  let folder: string;
  let dataDir: string;
  beforeEach(async () => {
    folder = await mkdtemp(path.join(tmpdir(), 'startup-errors-'));
    dataDir = await reachableTempDir('startup');
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
    await rm(dataDir, { recursive: true, force: true });
  });

  const file = (name: string, text?: string) => {
    const at = path.join(folder, name);
    if (text !== undefined) writeFileSync(at, text);
    return at;
  };

  /** Runs the service with `env` and returns everything it printed; it must exit with 1. */
  async function failedStart(env: Record<string, string>): Promise<string> {
    const service = startService({ PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, ...env });
    expect(await service.exited).toBe(1);
    return service.output();
  }

  it.each<[string, (at: typeof file) => [Record<string, string>, string]]>([
    [
      'an MCP servers file that does not exist',
      (at) => [
        { LEDGER_MCP_SERVERS: at('none.json') },
        `LEDGER_MCP_SERVERS (${at('none.json')}): the file does not exist`,
      ],
    ],
    [
      'an MCP servers file that is not JSON',
      (at) => [
        { LEDGER_MCP_SERVERS: at('broken.json', '{\n  "mcpServers": {"fs" {}}\n}') },
        `LEDGER_MCP_SERVERS (${at('broken.json')}): not valid JSON (line 2, column 23)`,
      ],
    ],
    [
      'an MCP server without a command or url',
      (at) => [
        { LEDGER_MCP_SERVERS: at('servers.json', '{"mcpServers": {"fs": {"args": ["/x"]}}}') },
        `LEDGER_MCP_SERVERS (${at('servers.json')}): mcpServers.fs: Invalid input`,
      ],
    ],
    [
      'an MCP servers path that is a folder',
      (at) => [{ LEDGER_MCP_SERVERS: at('') }, `LEDGER_MCP_SERVERS (${at('')}): this is a folder, not a file`],
    ],
    [
      'a firewall policy that does not exist',
      (at) => [
        { LEDGER_FIREWALL_POLICY: at('policy.yaml') },
        `LEDGER_FIREWALL_POLICY (${at('policy.yaml')}): the file does not exist`,
      ],
    ],
    [
      'a firewall policy that is not YAML',
      (at) => [
        { LEDGER_FIREWALL_POLICY: at('policy.yml', 'version: 1\ntools: [\n') },
        `LEDGER_FIREWALL_POLICY (${at('policy.yml')}): not valid YAML (line 3, column 1)`,
      ],
    ],
    [
      'a firewall policy with a wrong field',
      (at) => [
        { LEDGER_FIREWALL_POLICY: at('policy.json', '{"version": 1}') },
        `LEDGER_FIREWALL_POLICY (${at('policy.json')}): version: Invalid input: expected string, received number`,
      ],
    ],
    [
      'an upstreams file that does not exist',
      (at) => [
        { LEDGER_UPSTREAMS: at('upstreams.yaml') },
        `LEDGER_UPSTREAMS (${at('upstreams.yaml')}): the file does not exist`,
      ],
    ],
    [
      // The EventStoreDB client would print the whole string, password included, for an option it does not know.
      'an EventStoreDB option the client does not know, named without the string',
      () => [
        { EVENTSTORE_CONNECTION_STRING: 'esdb://admin:never-printed@127.0.0.1:2113?tls=false&tlsVerfyCert=false' },
        'environment variable EVENTSTORE_CONNECTION_STRING is invalid: ' +
          'the option "tlsVerfyCert" is not one the client knows',
      ],
    ],
    [
      'a signing key that is not a key',
      (at) => [
        { LEDGER_SIGNING_KEY: at('key.pem', 'not a key') },
        `LEDGER_SIGNING_KEY (${at('key.pem')}): not an Ed25519 private key in PKCS #8 PEM`,
      ],
    ],
  ])('%s', async (_case, setUp) => {
    const [env, line] = setUp(file);
    expect(await failedStart(env)).toBe(`block-ledger: ${line}\n`);
    // Checked before anything started: no PostgreSQL was even initialised.
    expect(existsSync(path.join(dataDir, 'postgres'))).toBe(false);
  });

  it('a file that holds keys is located, never quoted', async () => {
    const secret = 'sk-never-printed-0123456789';
    const text = `{"upstreams": [{"name": "x", "keys": [{"key": "${secret}"}`;
    const upstreams = file('upstreams.json', text);
    const output = await failedStart({ LEDGER_UPSTREAMS: upstreams });
    // It stops where the text does.
    const place = `line 1, column ${text.length + 1}`;
    expect(output).toBe(`block-ledger: LEDGER_UPSTREAMS (${upstreams}): not valid JSON (${place})\n`);
  });

  describe('with a PostgreSQL of its own (DATABASE_URL)', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('an unreachable DATABASE_URL, after retrying for LEDGER_CONNECT_RETRY_MS', async () => {
      const { url, port } = await unreachableDatabase();
      expectGaveUpOn(port, await failedStart({ DATABASE_URL: url, LEDGER_CONNECT_RETRY_MS: CONNECT_RETRY_MS }));
    });

    it('a DATABASE_URL whose password is refused, at once', async () => {
      const url = new URL(database.connectionString);
      url.password = 'not-the-password';
      const output = await failedStart({ DATABASE_URL: url.toString(), LEDGER_CONNECT_RETRY_MS: '60000' });
      expect(output).toBe(`block-ledger: DATABASE_URL: PostgreSQL at ${url.host} refused the password (28P01)\n`);
    });

    it('an MCP client that cannot be loaded, once the servers file is read: the service does not start', async () => {
      // A resolve hook, as a broken install would, makes the SDK's stdio transport unimportable.
      const hook = `export async function resolve(specifier, context, next) {
        if (specifier === '@modelcontextprotocol/sdk/client/stdio.js') throw new Error('no stdio transport here');
        return next(specifier, context);
      }`;
      const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
      const output = await failedStart({
        DATABASE_URL: database.connectionString,
        LEDGER_MCP_SERVERS: file('servers.json', '{"mcpServers": {"fs": {"command": "node"}}}'),
        NODE_OPTIONS: `--import ${JSON.stringify(`data:text/javascript,${encodeURIComponent(register)}`)}`,
      });
      expect(output.trimEnd().split('\n').at(-1)).toBe(
        'block-ledger: LEDGER_MCP_SERVERS: the MCP client could not be loaded (no stdio transport here)',
      );
    });

    it('waits for a DATABASE_URL that comes up while it retries', async () => {
      const port = await freePort();
      const target = new URL(database.connectionString);
      const url = new URL(database.connectionString);
      url.port = String(port);
      const service = startService({
        PORT: String(await freePort()),
        LEDGER_DATA_DIR: dataDir,
        DATABASE_URL: url.toString(),
        LEDGER_CONNECT_RETRY_MS: '60000',
      });
      let proxy: Server | undefined;
      try {
        await eventually('a logged retry', () =>
          Promise.resolve(service.output().includes('"variable":"DATABASE_URL"') || undefined),
        );
        // PostgreSQL "comes up": a proxy to the real one starts listening on the URL's port.
        proxy = await tcpProxy(port, Number(target.port));
        await waitUntilHealthy(service);
        service.child.kill('SIGTERM');
        expect(await service.exited).toBe(0);
      } finally {
        service.child.kill('SIGKILL');
        proxy?.close();
      }
    });
  });

  it('an unreachable EventStoreDB, after retrying; the embedded PostgreSQL is stopped again', async () => {
    const port = await freePort();
    const output = await failedStart({
      // The client reads a password that holds `?`: no part of it is logged as the address.
      EVENTSTORE_CONNECTION_STRING: `esdb://admin:pa?never-printed@127.0.0.1:${port}?tls=false`,
      LEDGER_CONNECT_RETRY_MS: '600',
      LEDGER_PG_PORT: String(await freePort()),
    });
    expect(output).toContain(`"address":"127.0.0.1:${port}"`);
    expect(output).not.toMatch(/never-printed|admin:pa/);
    expect(output.trimEnd().split('\n').at(-1)).toBe(
      `block-ledger: EVENTSTORE_CONNECTION_STRING: EventStoreDB at 127.0.0.1:${port} did not answer within ` +
        'LEDGER_CONNECT_RETRY_MS (600 ms): ECONNREFUSED',
    );
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
  });
});

/** Forwards every connection on `port` to `targetPort` on the loopback. */
async function tcpProxy(port: number, targetPort: number): Promise<Server> {
  const server = createServer((socket) => {
    const upstream = createConnection(targetPort, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}
