import { maskForms, secretForms, type ToolRef } from '#core';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { HttpMcpServer, McpServersConfig, StdioMcpServer } from './mcp-servers-config.js';

/**
 * The SDK's client and its two transports, imported once per process by the first executor built (there is one
 * only when MCP servers are configured: the SDK takes about 0.15 s of a start-up). One after another: Jest's module
 * loader fails concurrent imports that share a dependency ("request for 'zod/v4' is not in cache").
 */
let sdk: ReturnType<typeof importSdk> | undefined;
const mcpSdk = () => (sdk ??= importSdk());

async function importSdk() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { getDefaultEnvironment, StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  return { Client, getDefaultEnvironment, StdioClientTransport, StreamableHTTPClientTransport };
}

export interface McpTool {
  readonly name: string;
  readonly description?: string;
  readonly inputSchema: unknown;
}

/** An MCP tool result as the server sent it: content items and `isError`. */
export interface McpCallResult {
  readonly content: readonly unknown[];
  readonly isError: boolean;
  readonly [key: string]: unknown;
}

export interface McpExecutorOptions {
  readonly callTimeoutMs: number;
  /** How long a server's tool list is trusted before it is listed again. */
  readonly toolListTtlMs: number;
}

/**
 * Executes tool calls on MCP servers through the official SDK client. One client per server,
 * connected on first use and dropped after a transport failure (the next call reconnects).
 * A tool the server does not list is refused before anything runs.
 */
export class McpExecutor {
  private readonly clients = new Map<string, Promise<Client>>();
  private readonly toolLists = new Map<string, { readonly at: number; readonly tools: readonly McpTool[] }>();
  private readonly sdk = mcpSdk();
  /** Once closed, no call connects again (a stdio server is a child process nobody would close). */
  private closed = false;

  constructor(
    private readonly config: McpServersConfig,
    private readonly options: McpExecutorOptions,
  ) {
    // Awaited by `loaded()` at start-up, and by each connection.
    this.sdk.catch(() => undefined);
  }

  /** Resolves once the SDK is imported; a failed import rejects, and the service does not start. */
  async loaded(): Promise<void> {
    await this.sdk;
  }

  /** Whether the ledger is configured to execute this tenant's calls to tools of this server. */
  serves(server: string, tenant: string): boolean {
    if (!Object.hasOwn(this.config.mcpServers, server)) return false;
    const { tenants } = this.config.mcpServers[server];
    return tenants === undefined || tenants.includes(tenant);
  }

  async tools(server: string): Promise<readonly McpTool[]> {
    const cached = this.toolLists.get(server);
    if (cached && Date.now() - cached.at < this.options.toolListTtlMs) return cached.tools;
    const { tools } = await this.withClient(server, (client) =>
      client.listTools(undefined, { timeout: this.options.callTimeoutMs }),
    );
    this.toolLists.set(server, { at: Date.now(), tools });
    return tools;
  }

  /** The input schema the server lists for the tool, if it lists it: the firewall reads path arguments from it. */
  async inputSchema(tool: ToolRef): Promise<unknown> {
    return (await this.tools(tool.server)).find((listed) => listed.name === tool.name)?.inputSchema;
  }

  async call(tool: ToolRef, args: unknown): Promise<McpCallResult> {
    if (!(await this.tools(tool.server)).some((listed) => listed.name === tool.name))
      throw new Error(`MCP server ${tool.server} has no tool ${tool.name}`);
    const result = await this.withClient(tool.server, (client) =>
      client.callTool({ name: tool.name, arguments: (args ?? {}) as Record<string, unknown> }, undefined, {
        timeout: this.options.callTimeoutMs,
      }),
    );
    return { ...result, content: (result.content as unknown[] | undefined) ?? [], isError: result.isError === true };
  }

  async close(): Promise<void> {
    this.closed = true;
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(clients.map(async (client) => (await client.catch(() => undefined))?.close()));
  }

  private async withClient<T>(server: string, work: (client: Client) => Promise<T>): Promise<T> {
    let pending = this.clients.get(server);
    if (!pending) {
      pending = this.connect(server);
      this.clients.set(server, pending);
    }
    try {
      return await work(await pending);
    } catch (error) {
      // A broken transport is dropped; a tool's own error comes back as a result, not here.
      if (this.clients.get(server) === pending) this.clients.delete(server);
      await (await pending.catch(() => undefined))?.close().catch(() => undefined);
      throw withoutSecretsOf(this.config.mcpServers[server], error);
    }
  }

  private async connect(server: string): Promise<Client> {
    const entry = this.config.mcpServers[server];
    if (!entry) throw new Error(`no MCP server named ${server} is configured`);
    const { Client, getDefaultEnvironment, StdioClientTransport, StreamableHTTPClientTransport } = await this.sdk;
    if (this.closed) throw new Error('the MCP executor is closed');
    const client = new Client({ name: 'block-ledger', version: '0.1.0' });
    // Started as its entry says: what the transport reads of it (not the ledger's own `tenants`), in the default
    // environment plus its own.
    const stdioTransport = ({ command, args, cwd, env }: StdioMcpServer) =>
      new StdioClientTransport({ command, args, cwd, env: { ...getDefaultEnvironment(), ...env }, stderr: 'ignore' });
    const transport =
      'url' in entry && typeof entry.url === 'string'
        ? new StreamableHTTPClientTransport(new URL(entry.url), {
            requestInit: { headers: (entry as HttpMcpServer).headers },
          })
        : stdioTransport(entry as StdioMcpServer);
    await client.connect(transport, { timeout: this.options.callTimeoutMs });
    return client;
  }
}

/**
 * `error`, its message rid of what the server's entry configures, where secrets go: its headers' values, its
 * environment's, its arguments (a key after `--api-key`, a connection string), its URL's; each whole and in its
 * parts. A server's answer may quote what it was sent (the SDK quotes an HTTP refusal's body, a stdio server may
 * quote its command line), and the message is recorded in the log, where every reader sees it.
 */
function withoutSecretsOf(entry: McpServersConfig['mcpServers'][string] | undefined, error: unknown): unknown {
  // Not `instanceof Error`: fetch's errors come from another realm under Jest's VM modules.
  if (entry === undefined || typeof (error as Error | undefined)?.message !== 'string') return error;
  const told = error as Error;
  const { url, headers = {}, env = {}, args = [] } = entry as Partial<HttpMcpServer & StdioMcpServer>;
  const configured = [...Object.values(headers), ...Object.values(env), ...args, ...(url === undefined ? [] : [url])];
  told.message = maskForms(told.message, configured.flatMap(partsOf).flatMap(secretForms));
  return told;
}

/**
 * A configured value and its parts: words, `name=value` halves, and a URL's user, password, path segments and query
 * names and values, as written and decoded.
 */
function partsOf(value: string): string[] {
  const parts = [value, ...value.split(/[\s=]+/)];
  if (URL.canParse(value)) {
    const { username, password, pathname, search } = new URL(value);
    for (const part of [username, password, ...pathname.split('/'), ...search.split(/[?&=]/)])
      parts.push(part, decoded(part));
  }
  return parts;
}

function decoded(part: string): string {
  try {
    return decodeURIComponent(part.replaceAll('+', ' '));
  } catch {
    return part;
  }
}
