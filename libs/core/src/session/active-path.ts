import type { MessageState, SessionState } from './session-events.js';

/**
 * The active path: root → selected child → … → leaf. Until selections exist, the selected child
 * of a parent is its newest one (a new branch becomes the selected one).
 */
export function activePath(state: Extract<SessionState, { status: 'open' }>): MessageState[] {
  const childrenOf = new Map<string | null, MessageState[]>();
  for (const message of state.messages.values()) {
    const siblings = childrenOf.get(message.parentId) ?? [];
    siblings.push(message);
    childrenOf.set(message.parentId, siblings);
  }
  const path: MessageState[] = [];
  for (let parent: string | null = null; ; ) {
    const next: MessageState | undefined = childrenOf.get(parent)?.at(-1);
    if (!next) return path;
    path.push(next);
    parent = next.id;
  }
}
