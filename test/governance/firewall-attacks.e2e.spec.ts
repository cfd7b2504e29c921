import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import {
  call,
  governanceFixture,
  mcpServerBin,
  requestTool,
  trail,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

const completed = (toolCall: { status: string }) => toolCall.status === 'completed';
const DENIED_BY_FIREWALL = 'requested,firewall_evaluated,denied,completed';

/**
 * The review's attacks, through HTTP, against the official server-filesystem rooted one folder
 * above the policy's root (with that folder as its home): planted symlinks whose names a
 * normalising firewall misreads, a symlinked folder, relative and `~` paths, an unlisted path
 * argument, and a folder swapped for a symlink while a person decides. No secret may surface.
 */
describe('the firewall against planted paths, end to end', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let sessionId: string;
  let base: string;
  let workspace: string;
  const secrets = { key: 'SECRET-KEY-5f1c', aws: 'AWS-SECRET-77ad', ssh: 'SSH-PRIVATE-90be', env: 'ENV-TOKEN-c3d2' };
  const url = () => ledger.baseUrl;
  const read = (path: string) => ({ server: 'filesystem', name: 'read_text_file', args: { path } });

  beforeAll(async () => {
    fixture = await governanceFixture();
    workspace = fixture.workspace;
    base = path.dirname(workspace);
    mkdirSync(path.join(base, 'secret'));
    mkdirSync(path.join(base, '.aws'));
    mkdirSync(path.join(workspace, '.ssh'));
    mkdirSync(path.join(workspace, 'drop'));
    writeFileSync(path.join(base, 'secret', 'key'), secrets.key);
    writeFileSync(path.join(base, '.aws', 'credentials'), secrets.aws);
    writeFileSync(path.join(workspace, '.ssh', 'id_rsa'), secrets.ssh);
    writeFileSync(path.join(workspace, '.env'), secrets.env);
    symlinkSync(path.join(base, 'secret'), path.join(workspace, 'ｋｅｙｓ'));
    symlinkSync(path.join(workspace, '.env'), path.join(workspace, 'cfg%41.txt'));
    symlinkSync(path.join(workspace, '.ssh'), path.join(workspace, 'k\\s'));
    symlinkSync(path.join(base, 'secret'), path.join(workspace, 'linked'));
    const serversFile = path.join(base, 'attack-servers.json');
    writeFileSync(
      serversFile,
      JSON.stringify({
        mcpServers: {
          filesystem: {
            command: process.execPath,
            args: [mcpServerBin('server-filesystem'), base],
            env: { HOME: base },
          },
        },
      }),
    );
    const policyFile = path.join(base, 'attack-policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        version: 'attacks-1',
        tools: { allow: ['filesystem/read_*', 'filesystem/write_file'] },
        paths: { arguments: ['path'], roots: [workspace], deny: ['**/.ssh/**', '**/.ssh', '**/.env'] },
      }),
    );
    ledger = await startLedger(fixture.env({ LEDGER_MCP_SERVERS: serversFile, LEDGER_FIREWALL_POLICY: policyFile }));
    sessionId = (await call(url(), 'POST', '/v1/sessions', { title: 'attacks' })).body.id;
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('denies every planted path, names only the rule, and runs nothing', async () => {
    const attacks = [
      read(`${workspace}/ｋｅｙｓ/key`),
      read('workspace/ｋｅｙｓ/key'),
      read(`${workspace}/cfg%41.txt`),
      read(`${workspace}/k\\s/id_rsa`),
      read(`${workspace}/linked/key`),
      read('workspace/linked/key'),
      read('secret/key'),
      read('~/.aws/credentials'),
      read('~/secret/key'),
      read('workspace/.env'),
      read('a/'.repeat(100_000)),
      {
        server: 'filesystem',
        name: 'read_multiple_files',
        args: { paths: [`${workspace}/hello.txt`, `${workspace}/.env`, `${workspace}/.ssh/id_rsa`] },
      },
      { server: 'filesystem', name: 'read_multiple_files', args: { paths: ['workspace/hello.txt', 'secret/key'] } },
      { server: 'filesystem', name: 'read_text_file', args: ['workspace/.env'] },
    ];
    const through: unknown[] = [];
    for (const [index, { server, name, args }] of attacks.entries()) {
      const { toolCallId } = await requestTool(url(), sessionId, `attack_${index}`, { server, name }, args);
      const toolCall = await waitForToolCall(url(), toolCallId, completed);
      const denied = toolCall.decision?.stage === 'firewall' && trail(toolCall).join() === DENIED_BY_FIREWALL;
      if (denied && !toolCall.firewall.rule.includes(base)) continue;
      through.push({ index, trail: trail(toolCall), rule: toolCall.firewall?.rule.slice(0, 200) });
    }
    expect(through).toEqual([]);
  });

  it('places a relative path where the server does and hands the server the path it judged', async () => {
    const tool = { server: 'filesystem', name: 'read_text_file' };
    const { toolCallId } = await requestTool(url(), sessionId, 'relative_ok', tool, { path: 'workspace/hello.txt' });
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    const content = [{ type: 'text', text: 'hello from the ledger' }];
    expect(toolCall).toMatchObject({ outcome: 'succeeded', execution: { result: { content } } });
  });

  it('catches a folder swapped for a symlink while a person decides: recorded as failed, nothing written', async () => {
    const target = `${workspace}/drop/authorized_keys`;
    const tool = { server: 'filesystem', name: 'write_file' };
    const args = { path: target, content: 'ssh-rsa ATTACKER' };
    const { toolCallId } = await requestTool(url(), sessionId, 'swap', tool, args);
    const waiting = await waitForToolCall(url(), toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    rmSync(path.join(workspace, 'drop'), { recursive: true });
    symlinkSync(path.join(workspace, '.ssh'), path.join(workspace, 'drop'));
    const { argumentsSha256 } = waiting;
    const approved = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, 'alice');
    expect(approved.status).toBe(200);
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
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
    const failed = toolCall.events.find((event: { type: string }) => event.type === 'toolcall.execution_failed').data;
    expect(failed).toMatchObject({ error: expect.stringMatching(/^firewall rule paths\.deny\[\d\]/) });
    expect(failed.unknownOutcome).toBe(false);
    expect(failed.error).not.toContain(base);
    expect(existsSync(path.join(workspace, '.ssh', 'authorized_keys'))).toBe(false);
  });

  it('no secret appears in any response, block, the history or the log', async () => {
    const seen: string[] = [];
    // The tool_calls read model follows the log: wait (bounded) until it lists every call made above.
    const list = async () =>
      (await call(url(), 'GET', `/v1/tool-calls?sessionId=${sessionId}&limit=1000`)).body.toolCalls as { id: string }[];
    let calls = await list();
    for (let tries = 0; calls.length < 16 && tries < 100; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      calls = await list();
    }
    expect(calls.length).toBeGreaterThanOrEqual(16);
    for (const { id } of calls) seen.push(JSON.stringify((await call(url(), 'GET', `/v1/tool-calls/${id}`)).body));
    seen.push(JSON.stringify((await call(url(), 'GET', `/v1/sessions/${sessionId}/history`)).body));
    seen.push(JSON.stringify((await call(url(), 'GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body));
    const tree = (await call(url(), 'GET', `/v1/sessions/${sessionId}/tree`)).body;
    seen.push(JSON.stringify(tree));
    for (const messageId of JSON.stringify(tree).match(/[0-9a-f]{8}-[0-9a-f-]{27}/g) ?? []) {
      seen.push(JSON.stringify((await call(url(), 'GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body));
    }
    const database = new pg.Client({ connectionString: ledger.database.connectionString });
    await database.connect();
    try {
      const log = await database.query(
        `SELECT coalesce(string_agg(e::text, E'\\n'), '') AS log FROM event_log_records e`,
      );
      seen.push(log.rows[0].log);
    } finally {
      await database.end();
    }
    const everything = seen.join('\n');
    expect(everything).toContain('hello from the ledger');
    for (const secret of Object.values(secrets)) expect(everything).not.toContain(secret);
  });
});
