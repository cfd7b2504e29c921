import { decodedBlock, decodedGovernance, messageStatus, type SessionChanges } from '#core';
import { foldedSummary } from '../sessions/session-views.js';

/**
 * One update a live client receives. `key` names what it updates, so a newer update of the same
 * thing replaces an unsent older one (coalescing); `position` is the log position it reflects.
 * `urgent`: a state a client waits for (a message appearing or changing status, a governed call's
 * step), written at once with whatever else is pending instead of waiting for the stream's window,
 * unless the write budget has stretched that window (`SseStream.push`). Growing content waits.
 */
export interface LiveItem {
  readonly event: 'block' | 'message' | 'selection' | 'toolcall';
  readonly key: string;
  readonly position: bigint;
  readonly data: unknown;
  readonly urgent?: true;
}

/**
 * A session's changes as live items: `message` (the message without its blocks), `block` (the
 * block as a read returns it, with `messageId` and `index`; `removed: true` when it left the
 * display list), `selection` ({parentId, childId}), `toolcall` (a governed call's record, each
 * time the saga moves it: the same record its tool block carries in `metadata.governance`). A client that keeps the last `block` per id
 * and orders by `index` holds what a read returns.
 */
export function sessionItems(changes: SessionChanges | undefined, position: bigint): LiveItem[] {
  if (!changes) return [];
  const items: LiveItem[] = [];
  for (const { message, previous } of changes.messages) {
    // Every chunk moves its message's position; clients hear of a message when it appears, or its status or selected child changes.
    if (
      !previous ||
      messageStatus(previous) !== messageStatus(message) ||
      previous.selectedChildId !== message.selectedChildId
    ) {
      items.push({
        event: 'message',
        key: `message:${message.id}`,
        position,
        data: foldedSummary(message),
        urgent: true,
      });
    }
  }
  for (const selection of changes.selections)
    items.push({ event: 'selection', key: `selection:${selection.parentId ?? ''}`, position, data: selection });
  for (const { block, index } of changes.blocks) {
    const data = { ...decodedBlock(block), index };
    items.push({ event: 'block', key: `block:${block.messageId}:${block.id}`, position, data });
  }
  for (const { block, message } of changes.blocks) {
    const governance = block.metadata?.governance as { toolCallId?: string } | undefined;
    if (!governance) continue;
    const previous = changes.messages.find((changed) => changed.message === message)?.previous;
    if (previous?.blocks.blocks.find((earlier) => earlier.id === block.id)?.metadata?.governance === governance)
      continue;
    const data = { ...decodedGovernance(governance), messageId: message.id, toolId: block.toolId };
    items.push({ event: 'toolcall', key: `toolcall:${governance.toolCallId}`, position, data, urgent: true });
  }
  for (const { messageId, id } of changes.removedBlocks)
    items.push({ event: 'block', key: `block:${messageId}:${id}`, position, data: { id, messageId, removed: true } });
  return items;
}
