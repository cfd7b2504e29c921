import { governedToolCallId } from '#core';
import { call, governanceFixture, waitForToolCall, type GovernanceFixture } from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * One chunk the quota takes can start many tool calls, and each call's steps shown on its block
 * repeat its arguments: those steps stop at 1.5× the session's quota, while every call still runs
 * its course on its own stream (decision 0037).
 */
describe('tool calls started on a session near its quota', () => {
  const quota = 64 * 1024;
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env({ LEDGER_SESSION_MAX_BYTES: String(quota) }));
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('show their steps until the session holds 1.5× its quota, and each completes on its own stream', async () => {
    const url = ledger.baseUrl;
    const sessionId = (await call(url, 'POST', '/v1/sessions', { title: 'many calls' })).body.id as string;
    const messages = `/v1/sessions/${sessionId}/messages`;
    await call(url, 'POST', messages, { role: 'user', content: 'go' });
    const messageId = (await call(url, 'POST', messages, { role: 'assistant', model: 'm' })).body.id as string;
    // Thirty calls the firewall denies (no MCP server, no guardian), each with 2 kB of arguments.
    const responses = Array.from({ length: 30 }, (_, index) => ({
      id: `t${index}`,
      tool: { id: 'filesystem-move_file', name: 'move_file', serverName: 'filesystem', serverId: 'filesystem' },
      arguments: { source: 'a', destination: 'b', note: 'x'.repeat(2_200) },
      status: 'pending',
    }));
    const posted = await call(url, 'POST', `${messages}/${messageId}/chunks`, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'mcp_tool_pending', responses },
    ]);
    expect(posted.status).toBe(200);
    for (const { id } of responses)
      await waitForToolCall(
        url,
        governedToolCallId('default', sessionId, messageId, id),
        (toolCall) => toolCall.status === 'completed',
      );

    const events = (await call(url, 'GET', `/v1/sessions/${sessionId}/events?limit=1000`)).body.events as {
      type: string;
      data: unknown;
    }[];
    const bytes = events.reduce((sum, event) => sum + Buffer.byteLength(JSON.stringify(event.data)), 0);
    const updates = events.filter((event) => event.type === 'message.tool_call_updated');
    // Some steps were shown, and the ones that would pass 1.5× the quota were not.
    expect(updates.length).toBeGreaterThan(0);
    expect(updates.length).toBeLessThan(responses.length);
    expect(bytes).toBeGreaterThan(quota);
    expect(bytes).toBeLessThanOrEqual(1.5 * quota);
    const refused = await call(url, 'POST', messages, { role: 'user', content: 'more' });
    expect([refused.status, refused.body.error.code]).toEqual([409, 'session_full']);
  });
});
