/**
 * The branch tree of a session's messages (DESIGN §5), over any message shape that knows its
 * parent and its selected child: the session's folded state and the read-model rows alike.
 */
export interface TreeMessage {
  readonly id: string;
  readonly parentId: string | null;
  readonly selectedChildId: string | null;
}

/** The active path: the selected top-level message → its selected child → … → the leaf. */
export function activePath<Message extends TreeMessage>(
  selectedRootId: string | null,
  messages: ReadonlyMap<string, Message>,
): Message[] {
  const path: Message[] = [];
  for (
    let next = selectedRootId === null ? undefined : messages.get(selectedRootId);
    next;
    next = next.selectedChildId === null ? undefined : messages.get(next.selectedChildId)
  ) {
    path.push(next);
  }
  return path;
}

/** Children ids of every parent (`null` = the top-level messages), in creation order. */
export function childrenByParent(
  messagesInCreationOrder: Iterable<Pick<TreeMessage, 'id' | 'parentId'>>,
): Map<string | null, string[]> {
  const children = new Map<string | null, string[]>();
  for (const message of messagesInCreationOrder) {
    const siblings = children.get(message.parentId);
    if (siblings) siblings.push(message.id);
    else children.set(message.parentId, [message.id]);
  }
  return children;
}

/** Where a message sits among its parent's children, so a client can draw "2/3" arrows and select a neighbour. */
export interface Siblings {
  readonly ids: readonly string[];
  readonly index: number;
  readonly count: number;
}

export function siblingsOf(
  message: Pick<TreeMessage, 'id' | 'parentId'>,
  children: ReadonlyMap<string | null, readonly string[]>,
): Siblings {
  const ids = children.get(message.parentId) ?? [message.id];
  return { ids, index: ids.indexOf(message.id), count: ids.length };
}

/** One node of `GET …/tree`. */
export interface TreeNode {
  readonly id: string;
  readonly parentId: string | null;
  readonly children: readonly string[];
  readonly selectedChild: string | null;
}

export interface BranchTree<Message> {
  readonly roots: readonly string[];
  readonly selectedRoot: string | null;
  readonly activePath: readonly string[];
  readonly messages: readonly (Message & TreeNode)[];
}

/** Every message with its children and selected child, plus the top-level messages and the active path. */
export function branchTree<Message extends TreeMessage>(
  selectedRootId: string | null,
  messagesInCreationOrder: readonly Message[],
): BranchTree<Message> {
  const children = childrenByParent(messagesInCreationOrder);
  const byId = new Map(messagesInCreationOrder.map((message) => [message.id, message]));
  return {
    roots: children.get(null) ?? [],
    selectedRoot: selectedRootId,
    activePath: activePath(selectedRootId, byId).map((message) => message.id),
    messages: messagesInCreationOrder.map((message) => ({
      ...message,
      children: children.get(message.id) ?? [],
      selectedChild: message.selectedChildId,
    })),
  };
}
