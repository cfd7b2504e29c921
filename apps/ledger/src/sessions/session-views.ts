import { activePath, type MessageBlock, type MessageState, type SessionState } from '#core';

export interface MessageView {
  readonly id: string;
  readonly role: string;
  readonly parentId: string | null;
  readonly model: string | null;
  readonly content: string | null;
  readonly status: string;
  readonly createdAt: string;
  readonly position: number;
  readonly blocks: readonly MessageBlock[];
}

/** The read API's message shape, whether read from the read models or folded from the log: blocks in display order (Cherry Studio `MessageBlock`). */
export function messageView(message: MessageView): MessageView {
  const { id, role, parentId, model, content, status, createdAt, position, blocks } = message;
  return { id, role, parentId, model, content, status, createdAt, position, blocks };
}

export function foldedMessageView(message: MessageState): MessageView {
  return messageView({
    ...message,
    status: message.role === 'assistant' ? message.blocks.status : 'success',
    position: Number(message.position),
    blocks: message.blocks.blocks,
  });
}

export function sessionView(state: Extract<SessionState, { status: 'open' }>) {
  return {
    id: state.sessionId,
    title: state.title,
    metadata: state.metadata,
    createdAt: state.createdAt,
    position: Number(state.position),
    messages: activePath(state.messages.values()).map(foldedMessageView),
  };
}
