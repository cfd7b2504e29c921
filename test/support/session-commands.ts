import type { SessionCommand } from '#core';

/** Commands the suites that drive a session repository by hand send to open a session and its messages. */
export const openSessionCommand = (sessionId: string): SessionCommand => ({
  type: 'open_session',
  sessionId,
  title: null,
  metadata: {},
  owner: 'producer',
  writers: [],
});

/** An assistant message under the active leaf, with no model and no content yet. */
export const assistantMessageCommand = (messageId: string): SessionCommand => ({
  type: 'create_message',
  messageId,
  role: 'assistant',
  parentId: undefined,
  model: null,
  content: null,
});
