/**
 * The active path: root → selected child → … → leaf, over messages given in creation order.
 * Until selections exist, the selected child of a parent is its newest one (a new branch
 * becomes the selected one).
 */
export function activePath<Message extends { readonly id: string; readonly parentId: string | null }>(messagesInCreationOrder: Iterable<Message>): Message[] {
  const newestChild = new Map<string | null, Message>();
  for (const message of messagesInCreationOrder) newestChild.set(message.parentId, message);
  const path: Message[] = [];
  for (let next = newestChild.get(null); next; next = newestChild.get(next.id)) path.push(next);
  return path;
}
