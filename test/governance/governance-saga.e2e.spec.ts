import { existsSync, readFileSync } from 'node:fs';
import { governedToolCallId } from '#core';
import path from 'node:path';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { connectSse } from '../support/sse-client.js';
import { authorization, keyActor } from '../support/test-credentials.js';
import {
  call,
  governanceFixture,
  PRODUCER,
  requestTool,
  trail,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

const completed = (toolCall: { status: string }) => toolCall.status === 'completed';
const awaiting = (toolCall: { status: string }) => toolCall.status === 'awaiting_approval';

describe('tool-call governance end to end over HTTP', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let sessionId: string;
  const url = () => ledger.baseUrl;

  /** The tool block as the read models show it once they reflect the call's last event. */
  async function toolBlock(messageId: string, position: number) {
    const message = await call(url(), 'GET', `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`);
    expect(message.status).toBe(200);
    return message.body.blocks.find((block: { type: string }) => block.type === 'tool');
  }

  /** Waits, bounded, until the saga has shown the call in this governance state on its block. */
  async function blockShowing(messageId: string, position: number, status: string) {
    let block = await toolBlock(messageId, position);
    for (let tries = 0; block.metadata.governance?.status !== status && tries < 100; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      block = await toolBlock(messageId, position);
    }
    return block;
  }

  const postChunks = (messageId: string, chunks: unknown[]) =>
    call(url(), 'POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, chunks);
  /** A producer's own tool chunk for the filesystem server. */
  const toolChunk = (type: string, toolId: string, name: string, fields: Record<string, unknown>) => ({
    type,
    responses: [{ id: toolId, tool: { id: name, name, serverName: 'filesystem', serverId: 'filesystem' }, ...fields }],
  });
  const INVENTED = { content: [{ type: 'text', text: 'INVENTED OUTPUT' }], isError: false };

  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env({ LEDGER_LIVE_COALESCE_MS: '0' }));
    sessionId = (await call(url(), 'POST', '/v1/sessions', { title: 'governed' })).body.id;
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('denied by the firewall: nothing runs, the block shows the denial as an error result', async () => {
    const source = path.join(fixture.workspace, 'hello.txt');
    const { messageId, toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_fw',
      { server: 'filesystem', name: 'move_file' },
      { source, destination: `${source}.moved` },
    );
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    expect(trail(toolCall)).toEqual(['requested', 'firewall_evaluated', 'denied', 'completed']);
    expect(toolCall).toMatchObject({
      outcome: 'denied',
      requestedBy: keyActor(PRODUCER),
      firewall: { verdict: 'deny', rule: 'tools.deny[0]: filesystem/move_file', policyVersion: 'e2e-1' },
      decision: { approved: false, stage: 'firewall', by: 'firewall' },
    });
    expect(existsSync(source)).toBe(true);
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({
      status: 'error',
      toolId: 'call_fw',
      toolName: 'move_file',
      metadata: { rawMcpToolResponse: { status: 'error' }, governance: { status: 'denied', toolCallId } },
    });
    expect(block.content.content[0].text).toContain('denied (firewall');
    // A path that would read differently once decoded is denied, never decoded and checked as a copy.
    const outside = await requestTool(
      url(),
      sessionId,
      'call_fw2',
      { server: 'filesystem', name: 'read_text_file' },
      { path: `${fixture.workspace}/%2e%2e/%2e%2e/etc/passwd` },
    );
    const outsideCall = await waitForToolCall(url(), outside.toolCallId, completed);
    expect(outsideCall).toMatchObject({ outcome: 'denied', firewall: { verdict: 'deny' } });
    expect(outsideCall.firewall.rule).toBe('paths.ambiguous: path holds a percent escape');
  });

  it('allowed and executed by the filesystem server: the MCP result is on the block and in the model history', async () => {
    const { messageId, toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_read',
      { server: 'filesystem', name: 'read_text_file' },
      { path: path.join(fixture.workspace, 'hello.txt') },
    );
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approved',
      'execution_started',
      'execution_succeeded',
      'completed',
    ]);
    expect(toolCall).toMatchObject({
      outcome: 'succeeded',
      firewall: { verdict: 'allow' },
      guardian: { risk: 'low', reviewer: 'llm:guardian-test', mode: 'enforce', failed: false, cacheHit: false },
      decision: { approved: true, by: 'policy' },
      execution: { result: { isError: false, content: [{ type: 'text', text: 'hello from the ledger' }] } },
    });
    // On PostgreSQL the result and the completion are one append (decision 0052): one commit, so one
    // recorded time and adjacent positions, the block update after them. Appended apart, the result's
    // block update would lie between the two.
    const [succeeded, done] = toolCall.events.slice(-2);
    expect(done.position).toBe(succeeded.position + 1);
    expect(done.recordedAt).toBe(succeeded.recordedAt);
    // Each step names who recorded it and chains to the one before.
    expect(toolCall.events[0]).toMatchObject({ actor: 'system:governance-saga', revision: 0 });
    toolCall.events
      .slice(1)
      .forEach((event: { prevHash: string }, index: number) =>
        expect(event.prevHash).toBe(toolCall.events[index].hash),
      );
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({
      status: 'success',
      content: { isError: false, content: [{ type: 'text', text: 'hello from the ledger' }] },
      metadata: { governance: { status: 'succeeded' } },
    });
    // Whatever drives the model loop reads the result from the history.
    const history = await call(url(), 'GET', `/v1/sessions/${sessionId}/history`);
    const toolMessage = history.body.messages.find(
      (message: { role: string; tool_call_id?: string }) =>
        message.role === 'tool' && message.tool_call_id === 'call_read',
    );
    expect(toolMessage.content).toBe('hello from the ledger');
  });

  it('judged high-risk, refused to the requester and to a stale hash, approved by a reviewer, then executed once', async () => {
    const target = path.join(fixture.workspace, 'approved.txt');
    const live = connectSse(`${url()}/v1/sessions/${sessionId}/live`);
    expect((await live.opened).status).toBe(200);
    const { messageId, toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_write',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'approved write' },
    );
    const waiting = await waitForToolCall(url(), toolCallId, awaiting);
    expect(waiting).toMatchObject({
      guardian: { risk: 'high' },
      approval: { reason: expect.stringContaining('high') },
    });
    // The saga shows the wait on the block right after recording it.
    const pendingBlock = await blockShowing(messageId, waiting.position, 'awaiting_approval');
    expect(pendingBlock).toMatchObject({
      status: 'pending',
      metadata: { governance: { status: 'awaiting_approval' } },
    });
    // The queue (read model) lists it.
    const queue = async () =>
      (await call(url(), 'GET', '/v1/tool-calls?state=awaiting_approval')).body.toolCalls.map(
        (listed: { id: string }) => listed.id,
      );
    for (let tries = 0; !(await queue()).includes(toolCallId) && tries < 100; tries += 1)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await queue()).toContain(toolCallId);

    const { argumentsSha256 } = waiting;
    const self = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, PRODUCER);
    expect(self).toMatchObject({ status: 403, body: { error: { code: 'self_approval' } } });
    const stale = await call(
      url(),
      'POST',
      `/v1/tool-calls/${toolCallId}/approve`,
      { argumentsSha256: 'f'.repeat(64) },
      'alice',
    );
    expect(stale).toMatchObject({
      status: 422,
      body: { error: { code: 'arguments_mismatch', field: 'argumentsSha256' } },
    });
    const malformed = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { comment: 'ok' }, 'alice');
    expect(malformed).toMatchObject({ status: 400, body: { error: { field: 'argumentsSha256' } } });
    expect(trail(await waitForToolCall(url(), toolCallId, () => true))).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
    ]);

    const approved = await call(
      url(),
      'POST',
      `/v1/tool-calls/${toolCallId}/approve`,
      { argumentsSha256, comment: 'reviewed the path' },
      'alice',
    );
    expect(approved).toMatchObject({
      status: 200,
      body: { decision: { approved: true, by: keyActor('alice'), comment: 'reviewed the path' } },
    });
    const again = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/deny`, { argumentsSha256 }, 'bob');
    expect(again).toMatchObject({ status: 409, body: { error: { code: 'already_decided' } } });

    const toolCall = await waitForToolCall(url(), toolCallId, completed);
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
    expect(toolCall.events.find((event: { type: string }) => event.type === 'toolcall.approved').actor).toEqual(
      keyActor('alice'),
    );
    expect(readFileSync(target, 'utf8')).toBe('approved write');
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({
      status: 'success',
      metadata: { governance: { status: 'succeeded', decision: { by: keyActor('alice') } } },
    });
    // A producer following the session's live feed saw each move of the call.
    const liveStatuses = () =>
      live.events
        .filter((event) => event.event === 'toolcall' && event.data.toolCallId === toolCallId)
        .map((event) => event.data.status);
    for (let tries = 0; liveStatuses().at(-1) !== 'succeeded' && tries < 100; tries += 1)
      await new Promise((resolve) => setTimeout(resolve, 50));
    live.close();
    expect(liveStatuses()).toEqual(['requested', 'awaiting_approval', 'executing', 'succeeded']);
  });

  it('denied by a reviewer: the file is never written and the model reads the denial', async () => {
    const target = path.join(fixture.workspace, 'denied.txt');
    const { messageId, toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_denied',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'should not exist' },
    );
    const { argumentsSha256 } = await waitForToolCall(url(), toolCallId, awaiting);
    const denied = await call(
      url(),
      'POST',
      `/v1/tool-calls/${toolCallId}/deny`,
      { argumentsSha256, comment: 'not today' },
      'bob',
    );
    expect(denied).toMatchObject({
      status: 200,
      body: { status: 'denied', decision: { approved: false, by: keyActor('bob'), stage: 'reviewer' } },
    });
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'denied',
      'completed',
    ]);
    expect(existsSync(target)).toBe(false);
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({ status: 'error', metadata: { governance: { status: 'denied' } } });
    const history = await call(url(), 'GET', `/v1/sessions/${sessionId}/history`);
    const toolMessage = history.body.messages.find(
      (message: { tool_call_id?: string }) => message.tool_call_id === 'call_denied',
    );
    expect(toolMessage.content).toContain('not today');
  });

  it('two reviewers deciding at the same moment: exactly one decision is recorded', async () => {
    for (let round = 0; round < 3; round += 1) {
      const target = path.join(fixture.workspace, `race-${round}.txt`);
      const { toolCallId } = await requestTool(
        url(),
        sessionId,
        `call_race_${round}`,
        { server: 'filesystem', name: 'write_file' },
        { path: target, content: 'race' },
      );
      const { argumentsSha256 } = await waitForToolCall(url(), toolCallId, awaiting);
      const answers = await Promise.all([
        call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, 'alice'),
        call(url(), 'POST', `/v1/tool-calls/${toolCallId}/deny`, { argumentsSha256 }, 'bob'),
      ]);
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 409]);
      const toolCall = await waitForToolCall(url(), toolCallId, completed);
      const decisions = toolCall.events.filter(
        (event: { type: string }) => event.type === 'toolcall.approved' || event.type === 'toolcall.denied',
      );
      expect(decisions).toHaveLength(1);
      const winner = answers.find((answer) => answer.status === 200)!.body.decision.by;
      expect(decisions[0].actor).toBe(winner);
      expect(existsSync(target)).toBe(winner.endsWith(':alice'));
    }
  });

  it('the saga owns a governed block: producer chunks for its id change nothing, nor does block_complete', async () => {
    const target = path.join(fixture.workspace, 'owned.txt');
    const governedArgs = { path: target, content: 'governed write' };
    const writeFile = { server: 'filesystem', name: 'write_file' };
    const { messageId, toolCallId } = await requestTool(url(), sessionId, 'call_owned', writeFile, governedArgs);
    const waiting = await waitForToolCall(url(), toolCallId, awaiting);
    // The producer's chunks come after the saga showed the wait.
    await blockShowing(messageId, waiting.position, 'awaiting_approval');
    const other = { path: `${target}.x`, content: 'x' };
    const posted = await postChunks(messageId, [
      { seq: 3, ...toolChunk('mcp_tool_pending', 'call_owned', 'write_file', { arguments: other, status: 'pending' }) },
      { seq: 4, ...toolChunk('mcp_tool_in_progress', 'call_owned', 'write_file', { status: 'invoking' }) },
      { seq: 5, ...toolChunk('mcp_tool_complete', 'call_owned', 'write_file', { status: 'done', response: INVENTED }) },
      { seq: 6, type: 'block_complete' },
    ]);
    expect(posted).toMatchObject({ status: 200, body: { appended: 4 } });
    const messageRoute = `/v1/sessions/${sessionId}/messages/${messageId}`;
    const whilePending = await call(url(), 'GET', `${messageRoute}?minPosition=${posted.body.position}`);
    expect(whilePending.body.status).toBe('success');
    const pendingBlock = whilePending.body.blocks.find((block: { type: string }) => block.type === 'tool');
    expect(pendingBlock).toMatchObject({
      status: 'pending',
      arguments: governedArgs,
      metadata: { governance: { status: 'awaiting_approval' } },
    });
    expect(JSON.stringify(pendingBlock)).not.toContain('INVENTED');

    const decision = { argumentsSha256: waiting.argumentsSha256, comment: 'no' };
    expect((await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/deny`, decision, 'bob')).status).toBe(200);
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    expect(toolCall).toMatchObject({ outcome: 'denied', arguments: governedArgs });
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({
      status: 'error',
      arguments: governedArgs,
      metadata: { governance: { status: 'denied' } },
    });
    expect(JSON.stringify(block)).not.toContain('INVENTED');
    const history = (await call(url(), 'GET', `/v1/sessions/${sessionId}/history`)).body;
    const answers = history.messages.filter((entry: { tool_call_id?: string }) => entry.tool_call_id === 'call_owned');
    const [toolMessage] = answers;
    expect(toolMessage.content).toMatch(/denied \(reviewer, by key:[a-z0-9]{16}:bob\): no/);
    expect(JSON.stringify(history)).not.toContain('INVENTED');
    expect(existsSync(target)).toBe(false);
    expect(existsSync(`${target}.x`)).toBe(false);
  });

  it('producer chunks sent with the request itself are overwritten by the governed outcome', async () => {
    const source = path.join(fixture.workspace, 'hello.txt');
    await call(url(), 'POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'move it' });
    const assistant = { role: 'assistant', model: 'test-model' };
    const messageId = (await call(url(), 'POST', `/v1/sessions/${sessionId}/messages`, assistant)).body.id;
    const args = { source, destination: `${source}.moved` };
    const posted = await postChunks(messageId, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, ...toolChunk('mcp_tool_pending', 'call_raced', 'move_file', { arguments: args, status: 'pending' }) },
      { seq: 3, ...toolChunk('mcp_tool_complete', 'call_raced', 'move_file', { status: 'done', response: INVENTED }) },
      { seq: 4, type: 'block_complete' },
    ]);
    expect(posted.status).toBe(200);
    const toolCall = await waitForToolCall(
      url(),
      governedToolCallId('default', sessionId, messageId, 'call_raced'),
      completed,
    );
    expect(toolCall).toMatchObject({ outcome: 'denied', firewall: { verdict: 'deny' } });
    const block = await toolBlock(messageId, toolCall.position);
    expect(block).toMatchObject({ status: 'error', metadata: { governance: { status: 'denied' } } });
    expect(JSON.stringify(block)).not.toContain('INVENTED');
    const history = await call(url(), 'GET', `/v1/sessions/${sessionId}/history`);
    expect(JSON.stringify(history.body)).not.toContain('INVENTED');
    expect(existsSync(source)).toBe(true);
  });

  it('bad input gets a 4xx naming the field and records nothing', async () => {
    expect(await call(url(), 'GET', '/v1/tool-calls?state=bogus')).toMatchObject({
      status: 400,
      body: { error: { field: 'state' } },
    });
    // Bound for PostgreSQL, which takes no NUL; `..` no session's path can name.
    for (const sessionId of ['a%00b', '..'])
      expect(await call(url(), 'GET', `/v1/tool-calls?sessionId=${sessionId}`)).toMatchObject({
        status: 400,
        body: { error: { field: 'sessionId' } },
      });
    expect(await call(url(), 'GET', '/v1/tool-calls?colour=red')).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request' } },
    });
    const unknown = await call(
      url(),
      'POST',
      '/v1/tool-calls/00000000-0000-4000-8000-000000000000/approve',
      { argumentsSha256: 'a'.repeat(64) },
      'alice',
    );
    expect(unknown).toMatchObject({ status: 404, body: { error: { code: 'toolcall_not_found' } } });
    expect(await call(url(), 'GET', '/v1/tool-calls/00000000-0000-4000-8000-000000000000')).toMatchObject({
      status: 404,
    });
    const extra = await call(
      url(),
      'POST',
      '/v1/tool-calls/00000000-0000-4000-8000-000000000000/deny',
      { argumentsSha256: 'a'.repeat(64), approve: true },
      'alice',
    );
    expect(extra).toMatchObject({ status: 400, body: { error: { field: 'approve' } } });
    // Nothing of the refused requests was recorded.
    expect((await call(url(), 'GET', '/v1/tool-calls/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it('the tool_calls read model holds every call, and a rebuild from the log gives the same rows without asking anyone again', async () => {
    const list = async () =>
      (await call(url(), 'GET', `/v1/tool-calls?sessionId=${sessionId}&limit=1000`)).body.toolCalls;
    let before = await list();
    // Until every call is listed (a call the read model does not hold yet is missing, not incomplete), each completed.
    for (
      let tries = 0;
      (before.length < 10 || before.some((listed: { status: string }) => listed.status !== 'completed')) && tries < 100;
      tries += 1
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      before = await list();
    }
    expect(before).toHaveLength(10);
    // Listed in the order the calls were requested in the log, each with when.
    const requested = before.map((listed: { requestedPosition: number }) => listed.requestedPosition);
    expect(requested).toEqual([...requested].sort((a, b) => a - b));
    expect(new Set(requested).size).toBe(requested.length);
    for (const listed of before) {
      expect(listed.requestedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
      const read = (await call(url(), 'GET', `/v1/tool-calls/${listed.id}`)).body;
      expect({ requestedAt: read.requestedAt, requestedPosition: read.requestedPosition }).toEqual({
        requestedAt: listed.requestedAt,
        requestedPosition: listed.requestedPosition,
      });
      expect(read.events[0]).toMatchObject({ type: 'toolcall.requested', position: listed.requestedPosition });
    }
    // Metrics count the same outcomes the read model holds.
    const metrics = await (await fetch(`${url()}/metrics`, { headers: await authorization(url(), 'admin') })).text();
    for (const outcome of ['succeeded', 'denied']) {
      const expected = before.filter((listed: { outcome: string }) => listed.outcome === outcome).length;
      expect(metrics).toContain(`ledger_tool_calls_completed_total{outcome="${outcome}"} ${expected}`);
    }
    const guardianRequests = fixture.guardian.requests.length;
    const rebuilt = await call(url(), 'POST', '/v1/admin/rebuild?projection=tool-calls', undefined, 'admin');
    expect(rebuilt).toMatchObject({
      status: 200,
      body: { projections: { 'tool-calls': { events: expect.any(Number) } } },
    });
    expect(await list()).toEqual(before);
    expect(fixture.guardian.requests.length).toBe(guardianRequests);
  });
});

describe('an unanswered approval expires', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env({ LEDGER_APPROVAL_TIMEOUT_MS: '1000' }));
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('after its stored deadline it counts as denied, and a late approval gets 409', async () => {
    const sessionId = (await call(ledger.baseUrl, 'POST', '/v1/sessions', {})).body.id;
    const target = path.join(fixture.workspace, 'late.txt');
    const { messageId, toolCallId } = await requestTool(
      ledger.baseUrl,
      sessionId,
      'call_late',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'too late' },
    );
    const waiting = await waitForToolCall(ledger.baseUrl, toolCallId, awaiting);
    const toolCall = await waitForToolCall(ledger.baseUrl, toolCallId, completed);
    expect(trail(toolCall)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'expired',
      'denied',
      'completed',
    ]);
    const expired = toolCall.events.find((event: { type: string }) => event.type === 'toolcall.expired').data;
    expect(expired.deadline).toBe(waiting.approval.deadline);
    expect(Date.parse(expired.at)).toBeGreaterThanOrEqual(Date.parse(expired.deadline));
    expect(toolCall.decision).toMatchObject({ stage: 'expiry', by: 'expiry' });
    const late = await call(
      ledger.baseUrl,
      'POST',
      `/v1/tool-calls/${toolCallId}/approve`,
      { argumentsSha256: waiting.argumentsSha256 },
      'alice',
    );
    expect(late).toMatchObject({ status: 409, body: { error: { code: 'already_decided' } } });
    expect(existsSync(target)).toBe(false);
    const message = await call(
      ledger.baseUrl,
      'GET',
      `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${toolCall.position}`,
    );
    expect(message.body.blocks.find((block: { type: string }) => block.type === 'tool')).toMatchObject({
      status: 'error',
      metadata: { governance: { status: 'denied', decision: { stage: 'expiry' } } },
    });
  });
});
