import type { UnnumberedChunk } from '../dialects/dialect.js';
import { toolResponse } from '../dialects/dialect.js';
import type { DialectName } from '../dialects/dialects.js';
import { canonicalJson } from '../hashing/canonical-json.js';
import { nameUuid } from '../hashing/name-uuid.js';
import { turnOf, type Round, type ToolResult, type Turn } from '../history/conversation.js';
import {
  ancestry,
  evolveSession,
  type MessageState,
  type OpenSession,
  type SessionEvent,
  type SessionEventOf,
} from '../session/session-events.js';
import { chunkCursor, numberChunk, type DecidedEvent } from '../session/chunk-numbering.js';
import { ModelCallRequestError, type LeadingResult, type ModelCallRequest } from './model-call-request.js';

/**
 * Where a stateless model call belongs in the session's tree (DESIGN §12). Its turns are matched
 * from the root (or, for a request that names an earlier response, from that response's message) against
 * the children of each message, the selected child first:
 * - a turn equal to a child (text, tool calls and results; reasoning aside) follows it, and the
 *   child is selected if it was not;
 * - the first turn that matches none starts a new branch there: it and every turn after it become
 *   new messages, past assistant turns recorded from what the request says;
 * - a last assistant turn continues its message (the answer is its next round), and when the
 *   request adds the results its last calls were waiting for, they are recorded on it first.
 * Otherwise the answer is a new assistant message under the last turn.
 */
export interface ModelCallCommand {
  readonly request: ModelCallRequest;
  /** The dialect the answer's provider events are recorded in. */
  readonly dialect: DialectName;
  /** The answer's message when it is a new one; the ids of the turns this call adds are derived from it. */
  readonly answerMessageId: string;
}

export interface ModelCallPlacement {
  readonly events: readonly DecidedEvent[];
  /** The message the answer's events go to, and the provider seq its first event takes. */
  readonly answer: { readonly messageId: string; readonly nextEventSeq: number };
}

export function placeModelCall(command: ModelCallCommand, session: OpenSession): ModelCallPlacement {
  const placing = new Placement(command, session);
  return placing.place();
}

class Placement {
  private state: OpenSession;
  private readonly events: DecidedEvent[] = [];

  constructor(
    private readonly command: ModelCallCommand,
    session: OpenSession,
  ) {
    this.state = session;
  }

  place(): ModelCallPlacement {
    const { turns, previousResponseId, leadingResults } = this.command.request;
    let parentId = previousResponseId === undefined ? null : this.messageOfResponse(previousResponseId);
    if (parentId !== null) {
      for (const message of ancestry(this.state.messages, parentId)) this.select(message.parentId, message.id);
      if (leadingResults.length > 0) this.completeLeaf(parentId, leadingResults);
    }
    for (const [index, turn] of turns.entries()) {
      const last = index === turns.length - 1;
      const children = this.childrenOf(parentId);
      if (last && turn.role === 'assistant') return this.continueAssistant(parentId, children, turn, index);
      const same = children.find((child) => sameTurn(turnOf(historyMessage(child)), turn));
      if (!same) return this.answerNew(this.addTurns(parentId, turns.slice(index), index));
      this.select(parentId, same.id);
      parentId = same.id;
    }
    const leaf = parentId === null ? undefined : this.state.messages.get(parentId);
    if (turns.length === 0 && leaf && this.continuable(leaf)) return this.answerIn(leaf.id);
    return this.answerNew(parentId);
  }

  /** The last turn is the assistant's: the answer continues it, in its message or in one made from the request. */
  private continueAssistant(
    parentId: string | null,
    children: readonly MessageState[],
    turn: Extract<Turn, { role: 'assistant' }>,
    index: number,
  ) {
    for (const child of children.filter((candidate) => this.continuable(candidate))) {
      const recorded = turnOf(historyMessage(child));
      const missing = recorded && missingResults(recorded, turn);
      if (!missing) continue;
      this.select(parentId, child.id);
      if (missing.length > 0) this.recordResults(child.id, missing);
      return this.answerIn(child.id);
    }
    return this.answerIn(this.addTurns(parentId, [turn], index)!);
  }

  /**
   * The message that recorded the response a request names. Only this session's: a response of
   * another session (or tenant) on the same provider account is not the caller's to continue.
   */
  private messageOfResponse(responseId: string): string {
    for (const message of this.state.messages.values()) {
      const recorded =
        message.dialect?.name === 'openai-responses'
          ? (message.dialect.state as { responseId?: string }).responseId
          : undefined;
      if (recorded === responseId) return message.id;
    }
    throw new ModelCallRequestError('previous_response_id', 'names no response recorded in this session');
  }

  /** Results for the calls of the message a request continues, sent without repeating its turn. */
  private completeLeaf(leafId: string, results: readonly LeadingResult[]): void {
    const leaf = this.state.messages.get(leafId)!;
    const recorded = turnOf(historyMessage(leaf));
    const pending = recorded?.role === 'assistant' ? (recorded.rounds.at(-1)?.tools ?? []) : [];
    const answered = results.flatMap(({ toolId, result }) => {
      const call = pending.find((tool) => tool.id === toolId && tool.result === undefined);
      return call ? [{ ...call, result }] : [];
    });
    if (answered.length > 0 && this.continuable(leaf)) this.recordResults(leafId, answered);
  }

  /** New messages for `turns` under `parentId`; returns the last one's id. */
  private addTurns(parentId: string | null, turns: readonly Turn[], firstIndex: number): string | null {
    let parent = parentId;
    turns.forEach((turn, offset) => {
      const messageId = nameUuid(`model-call:${this.command.answerMessageId}:turn:${firstIndex + offset}`);
      const content = turn.role === 'assistant' ? null : turn.content;
      this.createMessage({ messageId, role: turn.role, parentId: parent, model: null, content });
      if (turn.role === 'assistant') {
        const continued = offset === turns.length - 1 && firstIndex + offset === this.command.request.turns.length - 1;
        const chunks = [
          ...turn.rounds.flatMap(roundChunks),
          ...(continued ? [] : [{ type: 'block_complete' } as const]),
        ];
        this.recordChunks(messageId, chunks);
      }
      parent = messageId;
    });
    return parent;
  }

  private recordResults(messageId: string, calls: readonly ResultedCall[]): void {
    this.recordChunks(messageId, [{ type: 'mcp_tool_complete', responses: calls.map(completedResponse) }]);
  }

  private recordChunks(messageId: string, chunks: readonly UnnumberedChunk[]): void {
    let cursor = chunkCursor(this.state.messages.get(messageId)!);
    const decided = chunks.map((chunk) => {
      const numbered = numberChunk(cursor, chunk, { origin: 'request' }, 0);
      cursor = numbered.cursor;
      return numbered.event;
    });
    decided.forEach((event) => this.emit(event.event, event.id));
  }

  private answerNew(parentId: string | null): ModelCallPlacement {
    const { answerMessageId: messageId, request } = this.command;
    this.createMessage({ messageId, role: 'assistant', parentId, model: request.model, content: null });
    return this.answerIn(messageId);
  }

  private answerIn(messageId: string): ModelCallPlacement {
    const message = this.state.messages.get(messageId)!;
    return {
      events: this.events,
      answer: { messageId, nextEventSeq: (message.dialect?.eventDigests.length ?? 0) + 1 },
    };
  }

  /** An assistant message the answer can go on in: not finished, and recorded in no other dialect. */
  private continuable(message: MessageState): boolean {
    if (message.role !== 'assistant' || message.blocks.finalized || message.producerChunks) return false;
    return message.dialect === null || message.dialect.name === this.command.dialect;
  }

  /** Named as `create_message` names its events. */
  private createMessage(data: SessionEventOf<'message.created'>['data']): void {
    this.emit({ type: 'message.created', data }, nameUuid(`message:${data.messageId}`));
  }

  private select(parentId: string | null, childId: string): void {
    const selected = parentId === null ? this.state.selectedRootId : this.state.messages.get(parentId)!.selectedChildId;
    if (selected === childId) return;
    const id = nameUuid(`model-call:${this.command.answerMessageId}:select:${childId}`);
    this.emit({ type: 'message.branch_selected', data: { parentId, childId } }, id);
  }

  /** Children of a message (`null`: the top-level ones), the selected one first, then the newest first. */
  private childrenOf(parentId: string | null): MessageState[] {
    const selected = parentId === null ? this.state.selectedRootId : this.state.messages.get(parentId)?.selectedChildId;
    const children = [...this.state.messages.values()].filter((message) => message.parentId === parentId).reverse();
    return [...children.filter((child) => child.id === selected), ...children.filter((child) => child.id !== selected)];
  }

  /** Decides an event and folds it in, so the next decision sees it. */
  private emit(event: SessionEvent, id: string): void {
    this.events.push({ id, event });
    const folded = evolveSession(this.state, { ...event, position: this.state.position, recordedAt: '' });
    this.state = folded as OpenSession;
  }
}

type ResultedCall = Round['tools'][number] & { readonly result: ToolResult };

function historyMessage(message: MessageState) {
  return { role: message.role, content: message.content, blocks: message.blocks.blocks };
}

/** Two turns say the same: role, content, and per round the text and the calls with their results (not reasoning). */
export function sameTurn(recorded: Turn | undefined, sent: Turn): boolean {
  return recorded !== undefined && canonicalJson(comparable(recorded)) === canonicalJson(comparable(sent));
}

/**
 * The results `sent` adds to `recorded`: `[]` when they say the same, the calls of the last round
 * that `sent` answers and `recorded` still waits for, or `undefined` when they differ otherwise.
 */
function missingResults(recorded: Turn, sent: Extract<Turn, { role: 'assistant' }>): ResultedCall[] | undefined {
  if (recorded.role !== 'assistant' || recorded.rounds.length !== sent.rounds.length) return undefined;
  if (sameTurn(recorded, sent)) return [];
  const pending = {
    ...recorded,
    rounds: recorded.rounds.map((round, index) =>
      index === recorded.rounds.length - 1 ? withoutResults(round) : round,
    ),
  };
  const lastSent = sent.rounds.at(-1)!;
  const lastRecorded = recorded.rounds.at(-1)!;
  const sentPending = {
    ...sent,
    rounds: sent.rounds.map((round) => (round === lastSent ? withoutResults(round) : round)),
  };
  if (!sameTurn(pending, sentPending)) return undefined;
  const added = lastSent.tools.filter(
    (tool, index) => tool.result !== undefined && lastRecorded.tools[index].result === undefined,
  );
  const agree = lastSent.tools.every((tool, index) => {
    const known = lastRecorded.tools[index].result;
    return known === undefined || canonicalJson(known) === canonicalJson(tool.result ?? null);
  });
  return agree ? (added as ResultedCall[]) : undefined;
}

function withoutResults(round: Round): Round {
  return { ...round, tools: round.tools.map((tool) => ({ ...tool, result: undefined })) };
}

function comparable(turn: Turn) {
  if (turn.role !== 'assistant') return turn;
  return {
    role: turn.role,
    rounds: turn.rounds.map((round) => ({
      text: round.text,
      tools: round.tools.map(({ id, name, arguments: args, result }) => ({
        id,
        name,
        arguments: args,
        result: result ?? null,
      })),
    })),
  };
}

/** A past round as chunks, the way a response would have streamed it: reasoning, text, calls, results. */
function roundChunks(round: Round): UnnumberedChunk[] {
  const resulted = round.tools.filter((tool): tool is ResultedCall => tool.result !== undefined);
  return [
    { type: 'llm_response_created' },
    ...round.thinking.flatMap((part): UnnumberedChunk[] => [
      { type: 'thinking.start' },
      {
        type: 'thinking.complete',
        text: part.text,
        ...(part.signature === undefined ? {} : { signature: part.signature }),
        ...(part.item === undefined ? {} : { item: part.item }),
      },
    ]),
    ...(round.text === ''
      ? []
      : [{ type: 'text.start' } as const, { type: 'text.complete', text: round.text } as const]),
    ...(round.tools.length === 0
      ? []
      : [
          {
            type: 'mcp_tool_pending' as const,
            responses: round.tools.map((tool) =>
              toolResponse(tool.id, tool.name, 'pending', { arguments: tool.arguments }),
            ),
          },
        ]),
    ...(resulted.length === 0
      ? []
      : [{ type: 'mcp_tool_complete' as const, responses: resulted.map(completedResponse) }]),
  ];
}

function completedResponse(call: ResultedCall) {
  return toolResponse(call.id, call.name, call.result.isError ? 'error' : 'done', {
    arguments: call.arguments,
    response: call.result.content,
  });
}
