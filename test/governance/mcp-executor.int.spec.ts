import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { McpExecutor } from '../../apps/ledger/src/governance/mcp-executor.js';
import { mcpServersSchema } from '../../apps/ledger/src/governance/mcp-servers-config.js';
import { freePort } from '../support/service-process.js';

const require = createRequire(import.meta.url);
const serverBin = (name: string) =>
  path.join(path.dirname(require.resolve(`@modelcontextprotocol/${name}/package.json`)), 'dist', 'index.js');

describe('MCP execution against the official reference servers', () => {
  const folder = realpathSync(mkdtempSync(path.join(tmpdir(), 'mcp-fs-')));
  writeFileSync(path.join(folder, 'hello.txt'), 'hello from the ledger');
  let everythingHttp: ChildProcess;
  let executor: McpExecutor;

  beforeAll(async () => {
    const port = await freePort();
    everythingHttp = spawn(process.execPath, [serverBin('server-everything'), 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      everythingHttp.stderr!.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
      everythingHttp.once('exit', (code) => reject(new Error(`server-everything exited with ${code}`)));
    });
    executor = new McpExecutor(
      mcpServersSchema.parse({
        mcpServers: {
          filesystem: { command: process.execPath, args: [serverBin('server-filesystem'), folder] },
          everything: {
            command: process.execPath,
            args: [serverBin('server-everything'), 'stdio'],
            tenants: ['alpha'],
          },
          'everything-http': { url: `http://127.0.0.1:${port}/mcp` },
        },
      }),
      { callTimeoutMs: 20_000, toolListTtlMs: 60_000 },
    );
  });
  afterAll(async () => {
    await executor?.close();
    everythingHttp?.kill();
    rmSync(folder, { recursive: true, force: true });
  });

  it('reads and writes files through server-filesystem over stdio, and records its errors as results', async () => {
    expect((await executor.tools('filesystem')).map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['read_text_file', 'write_file', 'list_directory']),
    );
    const read = await executor.call(
      { server: 'filesystem', name: 'read_text_file' },
      { path: path.join(folder, 'hello.txt') },
    );
    expect(read).toMatchObject({ isError: false, content: [{ type: 'text', text: 'hello from the ledger' }] });
    await executor.call(
      { server: 'filesystem', name: 'write_file' },
      { path: path.join(folder, 'out.txt'), content: 'written' },
    );
    expect(readFileSync(path.join(folder, 'out.txt'), 'utf8')).toBe('written');
    const outside = await executor.call({ server: 'filesystem', name: 'read_text_file' }, { path: '/etc/hostname' });
    expect(outside.isError).toBe(true);
  });

  it('calls server-everything over stdio and over Streamable HTTP', async () => {
    for (const server of ['everything', 'everything-http']) {
      const echoed = await executor.call({ server, name: 'echo' }, { message: `hi ${server}` });
      expect(echoed).toMatchObject({
        isError: false,
        content: [{ type: 'text', text: expect.stringContaining(`hi ${server}`) }],
      });
    }
  });

  it('refuses a tool the server does not list and a server that is not configured', async () => {
    await expect(executor.call({ server: 'filesystem', name: 'format_disk' }, {})).rejects.toThrow(
      /has no tool format_disk/,
    );
    await expect(executor.call({ server: 'nowhere', name: 'x' }, {})).rejects.toThrow(/no MCP server named nowhere/);
    expect(executor.serves('filesystem', 'alpha')).toBe(true);
    expect(executor.serves('nowhere', 'alpha')).toBe(false);
  });

  it("serves a server listing its tenants to those tenants only: another's calls are not the ledger's to run", () => {
    expect(executor.serves('everything', 'alpha')).toBe(true);
    expect(executor.serves('everything', 'beta')).toBe(false);
    expect(executor.serves('filesystem', 'beta')).toBe(true);
    // A name no tenant can have would leave the server serving nobody, silently: refused.
    for (const tenants of [[], ['Alpha'], ['alpha '], ['*']])
      expect(() => mcpServersSchema.parse({ mcpServers: { x: { command: 'x', tenants } } })).toThrow();
  });
});

describe('a closed MCP executor', () => {
  it('connects to no server again: a call after close is refused, and no server process is started for it', async () => {
    const folder = realpathSync(mkdtempSync(path.join(tmpdir(), 'mcp-closed-')));
    const started = path.join(folder, 'started');
    // A "server" that only leaves a mark that it was started: the executor must not start it.
    const marker = `require('node:fs').writeFileSync(${JSON.stringify(started)}, 'x')`;
    const executor = new McpExecutor(
      mcpServersSchema.parse({ mcpServers: { marker: { command: process.execPath, args: ['-e', marker] } } }),
      { callTimeoutMs: 2_000, toolListTtlMs: 60_000 },
    );
    try {
      await executor.loaded();
      await executor.close();
      await expect(executor.tools('marker')).rejects.toThrow('the MCP executor is closed');
      expect(existsSync(started)).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});

describe('an MCP server that quotes what it was sent in a refusal', () => {
  /** The message the executor fails with, as the tool call records it. */
  const refusalOf = (listing: Promise<unknown>) =>
    listing.then(
      () => 'listed',
      (failure: unknown) => (failure as Error).message,
    );

  it('has the entry’s secrets masked in the error recorded: its header (and bearer token alone), its URL’s path and query', async () => {
    const token = 'mcp-header-token-0123456789';
    const pathKey = 'path-key-0123456789abcdef';
    const queryKey = 'query-key-0123456789abcdef';
    // The SDK quotes a refusal's body in its error; this server quotes the request back, as some do.
    const echo = createServer((request, response) => {
      response.writeHead(401, { 'content-type': 'text/plain' });
      const { authorization, 'x-token': bare } = request.headers;
      response.end(`invalid token ${String(authorization)} for ${String(request.url)} by ${String(bare)}`);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const { port } = echo.address() as AddressInfo;
    const executor = new McpExecutor(
      mcpServersSchema.parse({
        mcpServers: {
          echo: {
            url: `http://127.0.0.1:${port}/mcp/${pathKey}/sse?key=${queryKey}&${queryKey}x&plus=sk+live+0123456789abcdef`,
            headers: { Authorization: `Bearer ${token}`, 'X-Token': token.slice(4) },
          },
        },
      }),
      { callTimeoutMs: 2_000, toolListTtlMs: 60_000 },
    );
    try {
      const refused = await refusalOf(executor.tools('echo'));
      expect(refused).toContain('invalid token ****');
      expect(refused).toContain('/mcp/****');
      expect(refused).toContain('?key=****');
      expect(refused).not.toMatch(/0123456789/);
    } finally {
      await executor.close();
      echo.close();
    }
  });

  it('has a stdio server’s arguments and environment masked, whole, in parts and in base64, when it quotes them', async () => {
    // A server that answers `initialize` with an error quoting how it was started, and the Basic credentials it
    // made of its token for a service behind it.
    const quoting = `process.stdin.on('data', (data) => {
      for (const line of String(data).split('\\n').filter(Boolean)) {
        const { id } = JSON.parse(line);
        if (id === undefined) continue;
        const basic = Buffer.from('ledger:' + process.env.UPSTREAM_TOKEN).toString('base64');
        const message = 'bad config: ' + process.argv.slice(1).join(' ') + ' upstream refused Basic ' + basic;
        process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message } }) + '\\n');
      }
    });`;
    const upstreamToken = 'upstream-token-abcdefghijklmnop';
    const executor = new McpExecutor(
      mcpServersSchema.parse({
        mcpServers: {
          quoting: {
            command: process.execPath,
            args: [
              '-e',
              quoting,
              '--',
              '--api-key=sk-live-0123456789abcdef',
              'postgres://ledger:db-password-0123456789@db.internal/ledger?sslkey=key+0123456789abcdef',
            ],
            env: { UPSTREAM_TOKEN: upstreamToken },
          },
        },
      }),
      { callTimeoutMs: 5_000, toolListTtlMs: 60_000 },
    );
    try {
      const refused = await refusalOf(executor.tools('quoting'));
      expect(refused).toContain('bad config:');
      expect(refused).toContain('upstream refused Basic ');
      expect(refused).not.toMatch(/0123456789/);
      // The token's own characters in base64 ('ledger:' is 7 bytes: the token starts a character into a group).
      const encoded = Buffer.from(`ledger:${upstreamToken}`).toString('base64');
      expect(refused).not.toContain(encoded.slice(12, -4));
    } finally {
      await executor.close();
    }
  });

  // fetch refuses a URL with credentials and quotes it whole: such an entry never works, and is refused at start.
  it.each(['http://ghp_USERINFOSECRET0123456789@127.0.0.1/mcp', 'http://user:pa55word0123456789@127.0.0.1/mcp'])(
    'refuses a server URL that holds credentials: %s',
    (url) => {
      const parsed = mcpServersSchema.safeParse({ mcpServers: { leaky: { url } } });
      expect(parsed.success).toBe(false);
      expect(JSON.stringify(parsed.error?.issues)).toContain('must be an http(s) URL without credentials');
      expect(JSON.stringify(parsed.error?.issues)).not.toMatch(/0123456789/);
    },
  );
});
