import type { MessageBlock } from '../blocks/message-block.js';
import type { MessageState, OpenSession, SessionState } from './session-events.js';

/**
 * What changed between two folds of one session, as the read models see it: the session row,
 * each changed message (with its creation ordinal), each block that is new, changed or moved,
 * each block that left the display list, and each selection that moved. The projection writes
 * these as rows; the live feed sends them to clients. The reducer keeps unchanged messages and
 * blocks as the same objects, so the comparison is by identity.
 */
export interface SessionChanges {
  readonly session: OpenSession;
  readonly messages: readonly {
    readonly message: MessageState;
    readonly ordinal: number;
    readonly previous: MessageState | undefined;
  }[];
  readonly blocks: readonly { readonly block: MessageBlock; readonly index: number; readonly message: MessageState }[];
  readonly removedBlocks: readonly { readonly messageId: string; readonly id: string }[];
  /** `parentId: null`: the session's selected top-level message. */
  readonly selections: readonly { readonly parentId: string | null; readonly childId: string }[];
}

export function sessionChanges(previous: SessionState, current: SessionState): SessionChanges | undefined {
  if (current.status !== 'open' || previous === current) return undefined;
  const previousMessages = previous.status === 'open' ? previous.messages : new Map<string, MessageState>();
  const changes = {
    session: current,
    messages: [] as SessionChanges['messages'][number][],
    blocks: [] as SessionChanges['blocks'][number][],
    removedBlocks: [] as SessionChanges['removedBlocks'][number][],
    selections: [] as SessionChanges['selections'][number][],
  };
  if (
    current.selectedRootId !== null &&
    (previous.status !== 'open' || previous.selectedRootId !== current.selectedRootId)
  ) {
    changes.selections.push({ parentId: null, childId: current.selectedRootId });
  }
  for (const { message, ordinal } of messagesToCompare(previousMessages, current)) {
    const earlier = previousMessages.get(message.id);
    if (earlier === message) continue;
    changes.messages.push({ message, ordinal, previous: earlier });
    if (message.selectedChildId !== null && message.selectedChildId !== earlier?.selectedChildId)
      changes.selections.push({ parentId: message.id, childId: message.selectedChildId });
    compareBlocks(earlier?.blocks.blocks ?? [], message, changes.blocks, changes.removedBlocks);
  }
  return changes;
}

/** Each block of `message` new, changed or moved since `before`, and each block of `before` it no longer shows. */
function compareBlocks(
  before: readonly MessageBlock[],
  message: MessageState,
  blocks: SessionChanges['blocks'][number][],
  removed: SessionChanges['removedBlocks'][number][],
): void {
  const after = message.blocks.blocks;
  // Usually every block keeps its place and new ones come after: compared place by place, by identity, with no
  // map of a message's thousands of blocks at each batch. A block inserted or dropped moves the others.
  if (before.length <= after.length && before.every((block, index) => block.id === after[index].id)) {
    after.forEach((block, index) => {
      if (block !== before[index]) blocks.push({ block, index, message });
    });
    return;
  }
  const places = new Map(before.map((block, index) => [block.id, { block, index }]));
  after.forEach((block, index) => {
    const was = places.get(block.id);
    if (!was || was.block !== block || was.index !== index) blocks.push({ block, index, message });
    places.delete(block.id);
  });
  for (const id of places.keys()) removed.push({ messageId: message.id, id });
}

/**
 * Each message of `current` that may differ from `previous`'s, with its creation ordinal, in creation
 * order: the few either fold set when both share their messages' base, else every one.
 */
function* messagesToCompare(
  previous: ReadonlyMap<string, MessageState>,
  current: OpenSession,
): Generator<{ readonly message: MessageState; readonly ordinal: number }> {
  const changed = current.messages.changedSince(previous);
  if (changed) {
    for (const { key, ordinal } of changed) yield { message: current.messages.get(key)!, ordinal };
    return;
  }
  let ordinal = 0;
  for (const message of current.messages.values()) yield { message, ordinal: ++ordinal };
}
