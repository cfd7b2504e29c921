import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { governedToolCallId } from '#core';
import { startChatCompletionsServer, type ChatCompletionsServer } from './chat-completions-server.js';
import { authorization } from './test-credentials.js';

const require = createRequire(import.meta.url);
export const mcpServerBin = (name: string) =>
  path.join(path.dirname(require.resolve(`@modelcontextprotocol/${name}/package.json`)), 'dist', 'index.js');

export const PRODUCER = 'producer-1';

/** An HTTP call as the principal named `who` (a key of its own: see TestCredentials). */
export async function call(
  baseUrl: string,
  method: string,
  route: string,
  body?: unknown,
  who = PRODUCER,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers: {
      ...(await authorization(baseUrl, who)),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/**
 * What a governed ledger needs on disk and on the network: a workspace folder with one file, an
 * `mcpServers` file running the official filesystem server on it (and server-everything), a
 * firewall policy in YAML, and a Chat Completions server whose guardian answers rate writes
 * high and everything else low.
 */
export interface GovernanceFixture {
  readonly workspace: string;
  readonly guardian: ChatCompletionsServer;
  env(extra?: Record<string, string>): Record<string, string>;
  close(): Promise<void>;
}

/** `policy`: YAML lines added to the firewall policy (e.g. an `approvals:` section). */
export async function governanceFixture({
  policy = [],
}: { policy?: readonly string[] } = {}): Promise<GovernanceFixture> {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'governance-')));
  const workspace = path.join(root, 'workspace');
  mkdirSync(workspace);
  writeFileSync(path.join(workspace, 'hello.txt'), 'hello from the ledger');
  const serversFile = path.join(root, 'mcp-servers.json');
  writeFileSync(
    serversFile,
    JSON.stringify({
      mcpServers: {
        filesystem: { command: process.execPath, args: [mcpServerBin('server-filesystem'), workspace] },
        everything: { command: process.execPath, args: [mcpServerBin('server-everything'), 'stdio'] },
      },
    }),
  );
  const policyFile = path.join(root, 'firewall.yaml');
  writeFileSync(
    policyFile,
    [
      'version: e2e-1',
      'default: deny',
      'tools:',
      '  allow: ["filesystem/read_*", "filesystem/write_file", "everything/trigger-long-running-operation"]',
      '  deny: ["filesystem/move_file", "*/delete_*"]',
      'paths:',
      '  arguments: [path, source, destination]',
      `  roots: [${JSON.stringify(workspace)}]`,
      '  deny: ["**/.ssh/**"]',
      ...policy,
      '',
    ].join('\n'),
  );
  const guardian = await startChatCompletionsServer((request) => {
    const asked = JSON.stringify(request.messages.at(-1));
    const risk = asked.includes('write_file') || asked.includes('long-running') ? 'high' : 'low';
    return { content: JSON.stringify({ risk, rationale: risk === 'high' ? 'it changes files' : 'it only reads' }) };
  });
  return {
    workspace,
    guardian,
    env: (extra = {}) => ({
      LEDGER_MCP_SERVERS: serversFile,
      LEDGER_FIREWALL_POLICY: policyFile,
      LEDGER_GUARDIAN_BASE_URL: guardian.baseUrl,
      LEDGER_GUARDIAN_API_KEY: 'test-key',
      LEDGER_GUARDIAN_MODEL: 'guardian-test',
      LEDGER_MCP_CALL_TIMEOUT_MS: '20000',
      ...extra,
    }),
    async close() {
      await guardian.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The chunks that announce one tool call to the ledger: the response starts, and the call is pending with `mcp_tool_pending`. */
export function toolRequestChunks(toolId: string, tool: { server: string; name: string }, args: unknown) {
  return [
    { seq: 1, type: 'llm_response_created' },
    {
      seq: 2,
      type: 'mcp_tool_pending',
      responses: [
        {
          id: toolId,
          tool: {
            id: `${tool.server}-${tool.name}`,
            name: tool.name,
            serverName: tool.server,
            serverId: tool.server,
          },
          arguments: args,
          status: 'pending',
        },
      ],
    },
  ];
}

/** A producer's turn that hands one tool call to the ledger: an assistant message whose chunks announce it (`toolRequestChunks`). */
export async function requestTool(
  baseUrl: string,
  sessionId: string,
  toolId: string,
  tool: { server: string; name: string },
  args: unknown,
  who = PRODUCER,
) {
  const messages = `/v1/sessions/${sessionId}/messages`;
  await call(baseUrl, 'POST', messages, { role: 'user', content: `please run ${tool.name}` }, who);
  const assistant = await call(baseUrl, 'POST', messages, { role: 'assistant', model: 'test-model' }, who);
  const messageId = assistant.body.id as string;
  const chunksSentAt = performance.now();
  const posted = await call(
    baseUrl,
    'POST',
    `/v1/sessions/${sessionId}/messages/${messageId}/chunks`,
    toolRequestChunks(toolId, tool, args),
    who,
  );
  if (posted.status !== 200) throw new Error(`chunks refused: ${JSON.stringify(posted.body)}`);
  return { messageId, toolCallId: governedToolCallId('default', sessionId, messageId, toolId), chunksSentAt };
}

/** Polls `GET /v1/tool-calls/:id` (folded from the call's stream) until `done` holds, bounded. */
export async function waitForToolCall(
  baseUrl: string,
  toolCallId: string,
  done: (call: any) => boolean,
  timeoutMs = 30_000,
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  let last: { status: number; body: any } | undefined;
  while (Date.now() < deadline) {
    last = await call(baseUrl, 'GET', `/v1/tool-calls/${toolCallId}`).catch(() => undefined);
    if (last?.status === 200 && done(last.body)) return last.body;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`tool call ${toolCallId} did not get there in ${timeoutMs} ms; last: ${JSON.stringify(last?.body)}`);
}

export const trail = (toolCall: { events: { type: string }[] }) =>
  toolCall.events.map((event) => event.type.replace('toolcall.', ''));
