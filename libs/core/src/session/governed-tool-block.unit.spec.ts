import { parseChunks } from '../chunks/chunk-schemas.js';
import type { MessageBlock } from '../blocks/message-block.js';
import { openAiHistory } from '../history/history-builder.js';
import type { ToolCallEvent } from '../toolcall/toolcall-events.js';
import {
  evolveToolCall,
  initialToolCallState,
  toolBlockUpdate,
  type ToolCallState,
} from '../toolcall/toolcall-state-machine.js';
import { decideSession, type SessionCommand } from './session-decider.js';
import { evolveSession, initialSessionState, type OpenSession, type SessionEvent } from './session-events.js';

/**
 * The saga owns a governed tool's block (DESIGN §6): once the session knows a call is governed,
 * the producer's chunks for that tool id are recorded and change nothing, and the message's end
 * does not freeze the block. Commands go through the real decider, events through the real fold.
 */
const at = '2026-01-01T00:00:00.000Z';
const server = { name: 'write_file', serverName: 'filesystem', serverId: 'filesystem', id: 'fs-write' };
const governedArgs = { path: '/ws/a.txt', content: 'governed' };
const toolChunk = (type: string, response: Record<string, unknown>) => ({
  type,
  responses: [{ id: 'call_1', tool: server, ...response }],
});
const pending = (args: unknown) => toolChunk('mcp_tool_pending', { arguments: args, status: 'pending' });
const invented = { content: [{ type: 'text', text: 'INVENTED OUTPUT' }], isError: false };
const producerComplete = toolChunk('mcp_tool_complete', { status: 'done', response: invented });
const producerInProgress = toolChunk('mcp_tool_in_progress', { status: 'invoking' });

/** The call's stream, as far as each governance state. */
const requested: ToolCallEvent = {
  type: 'toolcall.requested',
  data: {
    toolCallId: 't1',
    sessionId: 's1',
    messageId: 'a1',
    toolId: 'call_1',
    tool: { server: 'filesystem', name: 'write_file' },
    arguments: governedArgs,
    argumentsSha256: 'abc',
    requestedBy: 'producer',
  },
};
const screened: ToolCallEvent[] = [
  requested,
  { type: 'toolcall.firewall_evaluated', data: { verdict: 'ask', rule: 'r', policyVersion: 'v1' } },
  {
    type: 'toolcall.guardian_reviewed',
    data: { risk: 'low', rationale: 'ok', reviewer: 'rules', cacheHit: false, mode: 'enforce', failed: false },
  },
];
const awaitingApproval: ToolCallEvent[] = [
  ...screened,
  { type: 'toolcall.approval_requested', data: { reason: 'ask', deadline: at } },
];
const denied: ToolCallEvent[] = [
  ...awaitingApproval,
  { type: 'toolcall.denied', data: { by: 'bob', at, comment: 'not today', stage: 'reviewer' } },
];
const toolCall = (events: ToolCallEvent[]): ToolCallState =>
  events.reduce<ToolCallState>(
    (state, event, index) => evolveToolCall(state, { ...event, position: BigInt(index + 1) }),
    initialToolCallState,
  );

type Step = { readonly chunks: readonly Record<string, unknown>[] } | { readonly governance: ToolCallState };
const chunksOf = (...chunks: Record<string, unknown>[]): Step => ({ chunks });
const governanceAt = (events: ToolCallEvent[]): Step => ({ governance: toolCall(events) });

function given(...steps: Step[]) {
  const opened: SessionEvent[] = [
    { type: 'session.opened', data: { sessionId: 's1', title: null, metadata: {} } },
    { type: 'message.created', data: { messageId: 'u1', role: 'user', parentId: null, model: null, content: 'go' } },
    { type: 'message.created', data: { messageId: 'a1', role: 'assistant', parentId: 'u1', model: null, content: '' } },
  ];
  let state = initialSessionState;
  const record = (event: SessionEvent) => {
    const position = state.status === 'open' ? state.position + 1n : 1n;
    state = evolveSession(state, { ...event, position, recordedAt: at });
  };
  opened.forEach(record);
  let seq = 0;
  const apply = (step: Step) => {
    const numbered = (chunks: readonly Record<string, unknown>[]) =>
      parseChunks(chunks.map((chunk) => ({ seq: (seq += 1), ...chunk })));
    const shown = (governance: ToolCallState) => ({ eventId: 'e', ...toolBlockUpdate(governance)!.update });
    const command: SessionCommand =
      'chunks' in step
        ? { type: 'append_chunks', messageId: 'a1', chunks: numbered(step.chunks) }
        : { type: 'update_tool_call', messageId: 'a1', toolCallId: 't1', ...shown(step.governance) };
    decideSession(command, state).events.forEach(({ event }) => record(event));
  };
  steps.forEach(apply);
  const then = () => {
    const message = (state as OpenSession).messages.get('a1')!;
    const block = message.blocks.blocks.find((candidate) => candidate.type === 'tool')!;
    const history = openAiHistory([{ role: 'assistant', content: null, blocks: message.blocks.blocks }], {
      includeThinking: false,
    });
    // A call still awaited has no result in the history yet.
    return { block, message, toolResult: history.find((entry) => entry.role === 'tool')?.content ?? '' };
  };
  type Outcome = ReturnType<typeof then>;
  return {
    when(...later: Step[]) {
      const before = then().block;
      later.forEach(apply);
      return {
        then: (check: (after: Outcome & { before: MessageBlock }) => void) => check({ ...then(), before }),
      };
    },
  };
}

describe('a governed tool block belongs to the saga', () => {
  it('after the first governance update, producer tool chunks for that id are recorded and change nothing', () => {
    const reannounced = pending({ path: '/ws/.ssh/authorized_keys', content: 'evil' });
    for (const producerChunk of [producerComplete, producerInProgress, reannounced]) {
      given(chunksOf({ type: 'llm_response_created' }, pending(governedArgs)), governanceAt(awaitingApproval))
        .when(chunksOf(producerChunk))
        .then(({ block, before, toolResult }) => {
          expect(block).toBe(before);
          expect(block).toMatchObject({
            status: 'pending',
            arguments: governedArgs,
            metadata: { governance: { status: 'awaiting_approval' } },
          });
          expect(toolResult).not.toContain('INVENTED');
        });
    }
  });

  it('a denial recorded after block_complete reaches the block and the history, never the invented output', () => {
    given(chunksOf({ type: 'llm_response_created' }, pending(governedArgs)), governanceAt(awaitingApproval))
      .when(chunksOf(producerComplete, { type: 'block_complete' }), governanceAt(denied))
      .then(({ block, message, toolResult }) => {
        expect(message.blocks.status).toBe('success');
        expect(block).toMatchObject({ status: 'error', metadata: { governance: { status: 'denied' } } });
        expect(JSON.stringify(block)).not.toContain('INVENTED');
        expect(toolResult).toContain('denied (reviewer, by bob): not today');
      });
  });

  it('block_complete leaves a governed call open: the block stays pending until the saga settles it', () => {
    given(chunksOf({ type: 'llm_response_created' }, pending(governedArgs)), governanceAt(awaitingApproval))
      .when(chunksOf({ type: 'block_complete' }))
      .then(({ block }) => {
        expect(block).toMatchObject({ status: 'pending', metadata: { governance: { status: 'awaiting_approval' } } });
      });
  });

  it('producer chunks that raced ahead of the first governance update are overwritten by it', () => {
    given(chunksOf({ type: 'llm_response_created' }, pending(governedArgs)))
      .when(
        chunksOf(pending({ path: '/elsewhere' }), producerComplete, { type: 'block_complete' }),
        governanceAt(denied),
      )
      .then(({ block, toolResult }) => {
        expect(block).toMatchObject({
          status: 'error',
          arguments: governedArgs,
          metadata: { governance: { status: 'denied' } },
        });
        expect(JSON.stringify(block)).not.toContain('INVENTED');
        expect(toolResult).not.toContain('INVENTED');
      });
  });

  it('a call the ledger does not govern keeps the producer rules: its completion is shown as sent', () => {
    given(chunksOf({ type: 'llm_response_created' }, pending(governedArgs)))
      .when(chunksOf(producerComplete))
      .then(({ block }) => expect(block).toMatchObject({ status: 'success', content: invented }));
  });
});
