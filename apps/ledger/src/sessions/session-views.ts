import { activePath, type MessageState, type SessionState } from '#core';

/** The read API's shapes: messages with their blocks in display order (Cherry Studio `MessageBlock`). */
export function messageView(message: MessageState) {
  return {
    id: message.id,
    role: message.role,
    parentId: message.parentId,
    model: message.model,
    content: message.content,
    status: message.role === 'assistant' ? message.blocks.status : 'success',
    createdAt: message.createdAt,
    position: Number(message.position),
    blocks: message.blocks.blocks,
  };
}

export function sessionView(state: Extract<SessionState, { status: 'open' }>) {
  return {
    id: state.sessionId,
    title: state.title,
    metadata: state.metadata,
    createdAt: state.createdAt,
    position: Number(state.position),
    messages: activePath(state.messages.values()).map(messageView),
  };
}
