import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import {
  freePort,
  reachableTempDir,
  startService,
  waitUntilHealthy,
  type ServiceProcess,
} from '../support/service-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import {
  call,
  governanceFixture,
  requestTool,
  trail,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

/**
 * The saga's state is its stream: these tests kill the service (SIGKILL, no shutdown) at each
 * waiting point and start another process on the same database.
 */
describe('the governance saga across kill -9 and restart', () => {
  let fixture: GovernanceFixture;
  let database: TestDatabase;
  let service: ServiceProcess | undefined;
  let dataDir: string;

  async function start(extra: Record<string, string> = {}): Promise<string> {
    service = startService(
      fixture.env({
        DATABASE_URL: database.connectionString,
        PORT: String(await freePort()),
        LEDGER_DATA_DIR: dataDir,
        ...extra,
      }),
    );
    await waitUntilHealthy(service);
    return service.baseUrl;
  }

  async function kill(): Promise<void> {
    service!.child.kill('SIGKILL');
    await service!.exited;
    service = undefined;
  }

  /** A new session on `url` asking for server-everything's long-running operation (30 s). */
  async function requestLongRunning(url: string, toolId: string) {
    const sessionId = (await call(url, 'POST', '/v1/sessions', {})).body.id as string;
    const tool = { server: 'everything', name: 'trigger-long-running-operation' };
    return { sessionId, ...(await requestTool(url, sessionId, toolId, tool, { duration: 30, steps: 30 })) };
  }

  /** The session's block updates (`message.tool_call_updated`), in log order. */
  async function blockUpdates(url: string, sessionId: string): Promise<any[]> {
    const { body } = await call(url, 'GET', `/v1/sessions/${sessionId}/events?limit=1000`);
    return body.events.filter((event: { type: string }) => event.type === 'message.tool_call_updated');
  }

  /** The message's tool block once the read models reflect `position`. */
  async function toolBlock(url: string, sessionId: string, messageId: string, position: number) {
    const route = `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`;
    return (await call(url, 'GET', route)).body.blocks.find((block: { type: string }) => block.type === 'tool');
  }

  beforeAll(async () => {
    fixture = await governanceFixture();
    database = await createTestDatabase();
    // One data folder across restarts: the first start writes the admin key there.
    dataDir = await reachableTempDir('governance-restart');
  });
  afterAll(async () => {
    if (service) await kill();
    await database?.drop();
    await fixture?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('a deadline that passed while the service was down expires the call on restart', async () => {
    const url = await start({ LEDGER_APPROVAL_TIMEOUT_MS: '2000' });
    const sessionId = (await call(url, 'POST', '/v1/sessions', {})).body.id;
    const target = path.join(fixture.workspace, 'expired-while-down.txt');
    const { toolCallId } = await requestTool(
      url,
      sessionId,
      'call_down',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'x' },
    );
    const waiting = await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    // Let the saga's consumer move its checkpoint past the call: the restart must find it in the saga store, not by redelivery.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await kill();
    while (Date.now() < Date.parse(waiting.approval.deadline) + 200)
      await new Promise((resolve) => setTimeout(resolve, 100));

    const restarted = await start();
    const toolCall = await waitForToolCall(restarted, toolCallId, (current) => current.status === 'completed');
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'expired',
      'denied',
      'completed',
    ]);
    expect(toolCall.events.find((event: { type: string }) => event.type === 'toolcall.expired').data.deadline).toBe(
      waiting.approval.deadline,
    );
    expect(existsSync(target)).toBe(false);
    await kill();
  });

  it('killed while a call awaits approval: after the restart it still waits, and once approved it executes once', async () => {
    const url = await start();
    const sessionId = (await call(url, 'POST', '/v1/sessions', {})).body.id;
    const target = path.join(fixture.workspace, 'after-restart.txt');
    const { messageId, toolCallId } = await requestTool(
      url,
      sessionId,
      'call_restart',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'written once' },
    );
    const waiting = await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    await kill();

    const restarted = await start();
    // Give the restarted saga time to resume; the call must still be waiting for a person.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const still = await waitForToolCall(restarted, toolCallId, () => true);
    expect(trail(still)).toEqual(['requested', 'firewall_evaluated', 'guardian_reviewed', 'approval_requested']);
    // The queue is a read model the restarted instance catches up from its checkpoint: read it once it reflects the call.
    expect(
      (
        await call(restarted, 'GET', `/v1/tool-calls?state=awaiting_approval&minPosition=${still.position}`)
      ).body.toolCalls.map((listed: { id: string }) => listed.id),
    ).toContain(toolCallId);

    const approved = await call(
      restarted,
      'POST',
      `/v1/tool-calls/${toolCallId}/approve`,
      { argumentsSha256: waiting.argumentsSha256 },
      'alice',
    );
    expect(approved.status).toBe(200);
    const toolCall = await waitForToolCall(restarted, toolCallId, (current) => current.status === 'completed');
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'approved',
      'execution_started',
      'execution_succeeded',
      'completed',
    ]);
    expect(readFileSync(target, 'utf8')).toBe('written once');
    // The session's tool block went pending (requested, awaiting a person) → processing → success, each shown once.
    const events = await blockUpdates(restarted, sessionId);
    expect(events.map((event: any) => event.data.response.status)).toEqual(['pending', 'pending', 'invoking', 'done']);
    const governed = events.map((event: any) => event.data.governance.status);
    expect(governed).toEqual(['requested', 'awaiting_approval', 'executing', 'succeeded']);
    expect(await toolBlock(restarted, sessionId, messageId, toolCall.position)).toMatchObject({
      status: 'success',
    });
    await kill();
  });

  it('a server given to other tenants while a call waited runs none of it: the call fails before the server is asked', async () => {
    const url = await start();
    const sessionId = (await call(url, 'POST', '/v1/sessions', {})).body.id;
    const target = path.join(fixture.workspace, 'reconfigured.txt');
    const { toolCallId } = await requestTool(
      url,
      sessionId,
      'call_reconfigured',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'not for this tenant any more' },
    );
    const waiting = await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    await kill();
    // The operator gives the server to another tenant only (decision 0062), and starts the service again.
    const serversFile = fixture.env().LEDGER_MCP_SERVERS;
    const servers = JSON.parse(readFileSync(serversFile, 'utf8'));
    servers.mcpServers.filesystem.tenants = ['someone-else'];
    const reconfigured = path.join(path.dirname(serversFile), 'mcp-servers-reconfigured.json');
    writeFileSync(reconfigured, JSON.stringify(servers));
    const restarted = await start({ LEDGER_MCP_SERVERS: reconfigured });
    const approval = { argumentsSha256: waiting.argumentsSha256 };
    expect((await call(restarted, 'POST', `/v1/tool-calls/${toolCallId}/approve`, approval, 'alice')).status).toBe(200);
    const toolCall = await waitForToolCall(restarted, toolCallId, (current) => current.status === 'completed');
    expect(trail(toolCall)).toContain('execution_failed');
    expect(JSON.stringify(toolCall.events)).toContain('does not serve this tenant');
    expect(existsSync(target)).toBe(false);
    await kill();
  });

  it('killed while a tool executes: after the restart the outcome is recorded as unknown and the tool is not run again', async () => {
    const url = await start();
    const { sessionId, messageId, toolCallId } = await requestLongRunning(url, 'call_long');
    const waiting = await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    expect(
      (
        await call(
          url,
          'POST',
          `/v1/tool-calls/${toolCallId}/approve`,
          { argumentsSha256: waiting.argumentsSha256 },
          'alice',
        )
      ).status,
    ).toBe(200);
    await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'executing');
    await kill();

    const restarted = await start();
    const toolCall = await waitForToolCall(restarted, toolCallId, (current) => current.status === 'completed');
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'approved',
      'execution_started',
      'execution_failed',
      'completed',
    ]);
    expect(toolCall).toMatchObject({ outcome: 'failed', execution: { unknownOutcome: true, durationMs: null } });
    const block = await toolBlock(restarted, sessionId, messageId, toolCall.position);
    expect(block).toMatchObject({
      status: 'error',
      metadata: { governance: { status: 'failed', execution: { unknownOutcome: true } } },
    });
    expect(block.content.content[0].text).toContain('never recorded');
    await kill();
  });

  it('killed after the batched steps were stored and while the tool runs: the tool is not run again', async () => {
    // The guardian off: request, verdicts, approval and start wait for nothing outside and go in one append.
    const url = await start({ LEDGER_GUARDIAN_MODE: 'off' });
    const { sessionId, messageId, toolCallId } = await requestLongRunning(url, 'call_batched');
    const executing = await waitForToolCall(url, toolCallId, (toolCall) => toolCall.status === 'executing');
    expect(trail(executing)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approved',
      'execution_started',
    ]);
    expect(new Set(executing.events.map((event: { recordedAt: string }) => event.recordedAt)).size).toBe(1);
    await kill();

    const restarted = await start({ LEDGER_GUARDIAN_MODE: 'off' });
    const toolCall = await waitForToolCall(restarted, toolCallId, (current) => current.status === 'completed');
    expect(trail(toolCall)).toEqual([...trail(executing), 'execution_failed', 'completed']);
    expect(toolCall).toMatchObject({ outcome: 'failed', execution: { unknownOutcome: true, durationMs: null } });
    // The block went from the producer's pending straight to processing (stored with the start), then to the error.
    const events = await blockUpdates(restarted, sessionId);
    expect(events.map((event: any) => event.data.governance.status)).toEqual(['executing', 'failed']);
    expect(await toolBlock(restarted, sessionId, messageId, toolCall.position)).toMatchObject({
      status: 'error',
      metadata: { governance: { status: 'failed', execution: { unknownOutcome: true } } },
    });
    await kill();
  });
});
