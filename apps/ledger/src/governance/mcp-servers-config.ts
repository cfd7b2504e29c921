import { z } from 'zod';
import { loadConfigFile } from '../config/config-file.js';
import { httpUrl } from '../config/http-url.js';
import { TENANT_PATTERN } from '../identity/principal.js';

/**
 * The `mcpServers` format of Claude Desktop and Cherry Studio: stdio servers by command, Streamable HTTP servers by url.
 * The ledger adds `tenants`: the only tenants whose calls the server executes. A server without it serves every
 * tenant, and shares its state (a folder's files) among them.
 */
const tenantName = z.string().regex(TENANT_PATTERN, 'a tenant name: lowercase letters, digits and -, at most 63');
const servedTenants = { tenants: z.array(tenantName).min(1).optional() };
const stdioServer = z
  .object({
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
    ...servedTenants,
  })
  .passthrough();
const httpServer = z
  .object({
    // Its credentials go in `headers`: fetch refuses a URL holding them, quoting it whole.
    url: httpUrl,
    headers: z.record(z.string(), z.string()).optional(),
    ...servedTenants,
  })
  .passthrough();
export const mcpServersSchema = z
  .object({ mcpServers: z.record(z.string(), z.union([stdioServer, httpServer])) })
  .passthrough();
export type McpServersConfig = z.infer<typeof mcpServersSchema>;
export type StdioMcpServer = z.infer<typeof stdioServer>;
export type HttpMcpServer = z.infer<typeof httpServer>;

/** Reads the file `LEDGER_MCP_SERVERS` names (JSON, as Claude Desktop writes it). */
export function loadMcpServers(file: string): McpServersConfig {
  return loadConfigFile('LEDGER_MCP_SERVERS', file, mcpServersSchema);
}
