import {
  activePath,
  anthropicHistory,
  branchTree,
  childrenByParent,
  decodedBlock,
  lastSeq,
  messageStatus,
  openAiHistory,
  responsesHistory,
  siblingsOf,
  type ForkSource,
  type MessageBlock,
  type MessageState,
  type OpenSession,
} from '#core';

/**
 * The read API's shapes, built the same way whether the session comes from the read models or
 * from a fold of the log (`?at=`): a source only has to present a `SessionSnapshot`.
 */
export interface MessageView {
  readonly id: string;
  readonly role: string;
  readonly parentId: string | null;
  readonly model: string | null;
  readonly content: string | null;
  readonly status: string;
  readonly createdAt: string;
  readonly position: number;
  /** The producer's last recorded seq: the next batch starts at lastSeq + 1. */
  readonly lastSeq: number;
  readonly blocks: readonly MessageBlock[];
}

export type MessageSummary = Omit<MessageView, 'blocks'> & { readonly selectedChildId: string | null };

export interface SessionHeader {
  readonly id: string;
  readonly title: string | null;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly createdAt: string;
  readonly forkedFrom: ForkReference | null;
  /** The log position this read reflects. */
  readonly position: number;
}

/** A session as one consistent read: its header, its messages in creation order, and their blocks on demand. */
export interface SessionSnapshot {
  readonly header: SessionHeader;
  readonly selectedRootId: string | null;
  readonly messages: readonly MessageSummary[];
  blocksOf(messageIds: readonly string[]): Promise<ReadonlyMap<string, readonly MessageBlock[]>>;
}

/** A fork's source as the API shows it: positions are JSON numbers. */
export interface ForkReference {
  readonly sessionId: string;
  readonly position: number;
  readonly messageId: string | null;
}

export const forkReference = (source: ForkSource): ForkReference => ({ ...source, position: Number(source.position) });

export type HistoryFormat = 'openai' | 'anthropic' | 'openai-responses';

/** The message shape: blocks in display order (Cherry Studio `MessageBlock`), tool results as they came. */
export function messageView(message: MessageView): MessageView {
  const { id, role, parentId, model, content, status, createdAt, position, lastSeq, blocks } = message;
  return { id, role, parentId, model, content, status, createdAt, position, lastSeq, blocks: blocks.map(decodedBlock) };
}

export function foldedMessageView(message: MessageState): MessageView {
  return messageView({ ...foldedSummary(message), blocks: message.blocks.blocks });
}

/** The session with its active path; each message says where it sits among its siblings. */
export async function sessionView(snapshot: SessionSnapshot) {
  const children = childrenByParent(snapshot.messages);
  const path = await activePathViews(snapshot);
  return {
    ...snapshot.header,
    messages: path.map((message) => ({ ...message, siblings: siblingsOf(message, children) })),
  };
}

export function treeView(snapshot: SessionSnapshot) {
  const tree = branchTree(snapshot.selectedRootId, snapshot.messages);
  return {
    ...snapshot.header,
    ...tree,
    messages: tree.messages.map(
      ({ id, role, parentId, model, status, createdAt, position, children, selectedChild }) => ({
        id,
        role,
        parentId,
        model,
        status,
        createdAt,
        position,
        children,
        selectedChild,
      }),
    ),
  };
}

export async function historyView(snapshot: SessionSnapshot, format: HistoryFormat, includeThinking: boolean) {
  const path = await activePathViews(snapshot);
  const options = { includeThinking };
  const history =
    format === 'openai'
      ? { messages: openAiHistory(path, options) }
      : format === 'anthropic'
        ? anthropicHistory(path, options)
        : responsesHistory(path, options);
  return { format, sessionId: snapshot.header.id, position: snapshot.header.position, ...history };
}

/** A snapshot of a folded session state. */
export function foldedSnapshot(state: OpenSession): SessionSnapshot {
  const { sessionId: id, title, metadata, createdAt, forkedFrom, position, selectedRootId } = state;
  return {
    header: {
      id,
      title,
      metadata,
      createdAt,
      forkedFrom: forkedFrom && forkReference(forkedFrom),
      position: Number(position),
    },
    selectedRootId,
    messages: [...state.messages.values()].map(foldedSummary),
    blocksOf: (ids) => Promise.resolve(new Map(ids.map((id) => [id, state.messages.get(id)?.blocks.blocks ?? []]))),
  };
}

async function activePathViews(snapshot: SessionSnapshot): Promise<MessageView[]> {
  const path = activePath(snapshot.selectedRootId, new Map(snapshot.messages.map((message) => [message.id, message])));
  const blocks = await snapshot.blocksOf(path.map((message) => message.id));
  return path.map((message) => messageView({ ...message, blocks: blocks.get(message.id) ?? [] }));
}

export function foldedSummary(message: MessageState): MessageSummary {
  const { id, role, parentId, model, content, createdAt, selectedChildId } = message;
  return {
    id,
    role,
    parentId,
    model,
    content,
    createdAt,
    selectedChildId,
    status: messageStatus(message),
    position: Number(message.position),
    lastSeq: lastSeq(message),
  };
}
