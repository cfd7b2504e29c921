import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import {
  call,
  governanceFixture,
  requestTool,
  trail,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

/**
 * An MCP result is recorded as it came, whatever it holds: the official filesystem server reads
 * files holding NUL bytes, invalid UTF-8 and every byte value, and the result reads back
 * identical from the call, its tool block and the model history.
 */
describe('tool results are recorded as they came', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  const url = () => ledger.baseUrl;

  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  const files: Record<string, Buffer> = {
    'nul.txt': Buffer.from('before\0after\0\0end'),
    'invalid-utf8.txt': Buffer.from([0x61, 0xff, 0xfe, 0x62, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0x63]),
    'binary.bin': Buffer.from(Array.from({ length: 256 }, (_, byte) => byte)),
  };

  const completed = (toolCall: { status: string }) => toolCall.status === 'completed';
  /** The message's tool block once the read models reflect the call's last event. */
  async function toolBlock(sessionId: string, messageId: string, position: number) {
    const message = await call(url(), 'GET', `/v1/sessions/${sessionId}/messages/${messageId}?minPosition=${position}`);
    return message.body.blocks.find((candidate: { type: string }) => candidate.type === 'tool');
  }

  it.each(Object.keys(files))('%s: stored faithfully, read back identical (call, block, history)', async (name) => {
    const file = path.join(fixture.workspace, name);
    writeFileSync(file, files[name]);
    // What the server sends: the file read as UTF-8 (invalid bytes become U+FFFD, NUL stays NUL).
    const text = files[name].toString('utf8');
    const sessionId = (await call(url(), 'POST', '/v1/sessions', { title: name })).body.id;
    const toolId = `call_${name.replace(/\W/g, '_')}`;
    const tool = { server: 'filesystem', name: 'read_text_file' };
    const { messageId, toolCallId } = await requestTool(url(), sessionId, toolId, tool, { path: file });
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
    expect(toolCall.outcome).toBe('succeeded');
    expect(toolCall.execution.result.content).toEqual([{ type: 'text', text }]);
    expect(toolCall.execution.result.isError).toBe(false);

    const listed = (await call(url(), 'GET', `/v1/tool-calls?sessionId=${sessionId}&minPosition=${toolCall.position}`))
      .body.toolCalls;
    const results = listed.map((row: { execution: { result: unknown } | null }) => row.execution?.result);
    expect(results).toContainEqual(toolCall.execution.result);

    const block = await toolBlock(sessionId, messageId, toolCall.position);
    expect(block).toMatchObject({ status: 'success', content: toolCall.execution.result });
    expect(block.metadata.governance.execution.result).toEqual(toolCall.execution.result);

    const history = await call(url(), 'GET', `/v1/sessions/${sessionId}/history`);
    const toolMessage = history.body.messages.find((entry: { tool_call_id?: string }) => entry.tool_call_id === toolId);
    // The model reads what the result says: its text, exactly as the server sent it.
    expect(toolMessage.content).toBe(text);
  });

  it('binary read as media: the base64 the server sent is on the call and the block, byte for byte', async () => {
    const file = path.join(fixture.workspace, 'media.bin');
    writeFileSync(file, files['binary.bin']);
    const sessionId = (await call(url(), 'POST', '/v1/sessions', { title: 'media' })).body.id;
    const tool = { server: 'filesystem', name: 'read_media_file' };
    const { messageId, toolCallId } = await requestTool(url(), sessionId, 'call_media', tool, { path: file });
    const toolCall = await waitForToolCall(url(), toolCallId, completed);
    expect(toolCall.outcome).toBe('succeeded');
    const [item] = toolCall.execution.result.content;
    expect(Buffer.from(item.resource.blob, 'base64').equals(files['binary.bin'])).toBe(true);
    expect((await toolBlock(sessionId, messageId, toolCall.position)).content).toEqual(toolCall.execution.result);
  });
});
