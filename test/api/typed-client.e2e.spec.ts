import path from 'node:path';
import createClient from 'openapi-fetch';
import { governanceFixture, type GovernanceFixture } from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually } from '../support/probe.js';
import type { paths } from './ledger-api.js';

/**
 * A whole session driven through a client nobody here wrote: openapi-fetch, typed by the
 * openapi-typescript generation of the service's document (ledger-api.ts, kept equal to a fresh
 * generation by openapi-contract.e2e.spec.ts). This file is type-checked against those types
 * (ts-jest and `npm run typecheck`): a contract that drifted from what the routes take or answer
 * fails here, at compile time or at the assertions.
 */
describe('a typed client generated from the OpenAPI document', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let client: ReturnType<typeof createClient<paths>>;
  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
    const key = await ledger.credentials.key('typed-client');
    client = createClient<paths>({ baseUrl: ledger.baseUrl, headers: { authorization: `Bearer ${key}` } });
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('opens a session, records a governed tool call and an answer, reads tree and history, and forks', async () => {
    const opened = await client.POST('/v1/sessions', {
      body: { title: 'typed', metadata: { client: 'openapi-fetch' } },
    });
    expect(opened.response.status).toBe(201);
    const sid = opened.data!.id;
    const session = { params: { path: { sid } } };

    const question = await client.POST('/v1/sessions/{sid}/messages', {
      ...session,
      body: { id: 'u1', role: 'user', content: 'What does hello.txt say?' },
    });
    expect(question.data).toMatchObject({ id: 'u1', parentId: null });
    const retried = await client.POST('/v1/sessions/{sid}/messages', {
      ...session,
      body: { id: 'u1', role: 'user', content: 'What does hello.txt say?' },
    });
    expect({ status: retried.response.status, data: retried.data }).toEqual({ status: 200, data: question.data });
    const answer = await client.POST('/v1/sessions/{sid}/messages', {
      ...session,
      body: { id: 'a1', role: 'assistant', model: 'test-model' },
    });
    expect(answer.data?.parentId).toBe('u1');

    const chunks = { params: { path: { sid, mid: 'a1' } } };
    const toolRound = await client.POST('/v1/sessions/{sid}/messages/{mid}/chunks', {
      ...chunks,
      body: [
        { seq: 1, type: 'llm_response_created' },
        {
          seq: 2,
          type: 'mcp_tool_pending',
          responses: [
            {
              id: 'call_read',
              tool: { id: 'filesystem-read_text_file', name: 'read_text_file', serverName: 'filesystem' },
              arguments: { path: path.join(fixture.workspace, 'hello.txt') },
              status: 'pending',
            },
          ],
        },
        { seq: 3, type: 'llm_response_complete' },
      ],
    });
    expect(toolRound.data).toMatchObject({ appended: 3, duplicates: 0, ignored: [] });

    const listed = await eventually('the governed call completes', async () => {
      const { data } = await client.GET('/v1/tool-calls', { params: { query: { sessionId: sid } } });
      const [call] = data?.toolCalls ?? [];
      return call?.status === 'completed' ? call : undefined;
    });
    expect(listed).toMatchObject({ outcome: 'succeeded', tool: { server: 'filesystem', name: 'read_text_file' } });
    expect(typeof listed.requestedAt).toBe('string');
    const trail = await client.GET('/v1/tool-calls/{id}', { params: { path: { id: listed.id } } });
    expect(trail.data?.requestedPosition).toBe(listed.requestedPosition);
    expect(trail.data?.events.map((event) => event.type).at(-1)).toBe('toolcall.completed');

    const textRound = await client.POST('/v1/sessions/{sid}/messages/{mid}/chunks', {
      ...chunks,
      body: [
        { seq: 4, type: 'llm_response_created' },
        { seq: 5, type: 'text.start' },
        { seq: 6, type: 'text.delta', text: 'It says hello' },
        { seq: 7, type: 'text.complete', text: 'It says hello from the ledger.' },
        { seq: 8, type: 'block_complete' },
        { seq: 9, type: 'text.delta', text: 'too late' },
      ],
    });
    expect(textRound.data?.ignored).toEqual([{ seq: 9, reason: 'message already finalized' }]);
    const position = textRound.data!.position;

    const read = await client.GET('/v1/sessions/{sid}/messages/{mid}', chunks);
    expect(read.data).toMatchObject({ status: 'success', lastSeq: 9 });
    const blockTypes = read.data?.blocks.map((block) => block.type);
    expect(blockTypes).toEqual(['tool', 'main_text']);

    const tree = await client.GET('/v1/sessions/{sid}/tree', {
      params: { path: { sid }, query: { minPosition: position } },
    });
    expect(tree.data).toMatchObject({ roots: ['u1'], activePath: ['u1', 'a1'], position: expect.any(Number) });

    const history = await client.GET('/v1/sessions/{sid}/history', {
      params: { path: { sid }, query: { format: 'openai' } },
    });
    expect(history.data?.messages).toEqual([
      { role: 'user', content: 'What does hello.txt say?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [expect.objectContaining({ id: 'call_read', type: 'function' })],
      },
      { role: 'tool', tool_call_id: 'call_read', content: expect.stringContaining('hello from the ledger') },
      { role: 'assistant', content: 'It says hello from the ledger.' },
    ]);

    const fork = await client.POST('/v1/sessions/{sid}/fork', {
      ...session,
      body: { messageId: 'u1', title: 'again' },
    });
    expect(fork.response.status).toBe(201);
    expect(fork.data?.forkedFrom).toEqual({ sessionId: sid, position: expect.any(Number), messageId: 'u1' });
    const forked = await client.GET('/v1/sessions/{sid}', { params: { path: { sid: fork.data!.id } } });
    expect(forked.data).toMatchObject({ title: 'again', forkedFrom: fork.data!.forkedFrom });
    expect(forked.data?.messages.map((message) => message.id)).toEqual(['u1']);

    const beyond = await client.GET('/v1/sessions/{sid}', {
      params: { path: { sid }, query: { at: position + 1_000_000 } },
    });
    expect(beyond.error?.error).toMatchObject({ code: 'position_beyond_head', field: 'at' });
  });
});
