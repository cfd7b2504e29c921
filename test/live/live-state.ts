import type { SseEvent } from '../support/sse-client.js';

/** What a live client holds: the last `block` per id (ordered by `index`), the last `message` per id, the selections. */
export class LiveState {
  readonly blocks = new Map<string, Record<string, any>>();
  readonly messages = new Map<string, Record<string, any>>();
  readonly selections = new Map<string, string>();

  apply(event: SseEvent): void {
    if (event.event === 'block') {
      if (event.data.removed) this.blocks.delete(event.data.id);
      else this.blocks.set(event.data.id, event.data);
    } else if (event.event === 'message') this.messages.set(event.data.id, event.data);
    else if (event.event === 'selection') this.selections.set(event.data.parentId ?? '', event.data.childId);
  }

  /** A message's blocks as a read returns them. */
  blocksOf(messageId: string): Record<string, unknown>[] {
    return [...this.blocks.values()]
      .filter((block) => block.messageId === messageId)
      .sort((a, b) => a.index - b.index)
      .map(({ index: _index, ...block }) => block);
  }

  clone(): LiveState {
    const copy = new LiveState();
    for (const [key, value] of this.blocks) copy.blocks.set(key, value);
    for (const [key, value] of this.messages) copy.messages.set(key, value);
    for (const [key, value] of this.selections) copy.selections.set(key, value);
    return copy;
  }
}

/** The session's messages with their blocks, as a client assembles them, in the read API's shape (minus fields the live feed does not carry). */
export function assembled(state: LiveState, messageIds: readonly string[]) {
  return messageIds.map((id) => ({ id, status: state.messages.get(id)?.status, blocks: state.blocksOf(id) }));
}

/** The same view of a read: `GET /v1/sessions/:sid` messages. */
export function readView(messages: readonly { id: string; status: string; blocks: unknown[] }[]) {
  return messages.map(({ id, status, blocks }) => ({ id, status, blocks }));
}
