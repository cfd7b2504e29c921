import { approximateSize } from '../approximate-size.js';
import type { MessageBlock } from '../blocks/message-block.js';
import type { MessageState, SessionState } from './session-events.js';

/**
 * What a fold holds beyond its blocks' own data, measured on Node 20 and rounded up (docs/benchmarks.md, forty-third
 * issue-15 round): each chunk or provider event a message recorded (its seq's digest, its snapshots) and each block
 * (the object, its place in the message's list, maps and positions). A fold's event data undercounted a message of
 * small tool calls fivefold, so caches of folds bounded by it could outgrow the heap.
 */
const BYTES_PER_EVENT = 128;
const BYTES_PER_BLOCK = 384;

// By identity: a fold keeps unchanged messages and blocks as the same objects, so each is measured once.
const messageFootprints = new WeakMap<MessageState, number>();
const blockFootprints = new WeakMap<MessageBlock, number>();

/**
 * About what the fold `state` holds in memory, in bytes, at most. `from`: a fold of the same session it grew from,
 * with its footprint: then only the messages either set since are measured, when both stand on one base of messages.
 */
export function foldFootprint(
  state: SessionState,
  from?: { readonly state: SessionState; readonly footprint: number },
): number {
  if (state.status !== 'open') return 0;
  if (from?.state.status === 'open') {
    const { messages: earlier } = from.state;
    const changed = state.messages.changedSince(earlier);
    if (changed) {
      let total = from.footprint;
      for (const { key } of changed) {
        const before = earlier.get(key);
        total += messageFootprint(state.messages.get(key)!, before) - (before ? messageFootprint(before) : 0);
      }
      return total;
    }
  }
  let total = 0;
  for (const message of state.messages.values()) total += messageFootprint(message);
  return total;
}

/** Measured from `before`, an earlier version of it, when that one was: only the places whose blocks differ. */
function messageFootprint(message: MessageState, before?: MessageState): number {
  let bytes = messageFootprints.get(message);
  if (bytes !== undefined) return bytes;
  const earlier = before && messageFootprints.get(before);
  const blocks = message.blocks.blocks;
  if (earlier === undefined) {
    bytes = ownFootprint(message);
    for (const block of blocks) bytes += blockFootprint(block);
  } else {
    bytes = earlier - ownFootprint(before!) + ownFootprint(message);
    const previous = before!.blocks.blocks;
    for (let index = 0; index < Math.max(blocks.length, previous.length); index += 1) {
      if (blocks[index] === previous[index]) continue;
      if (index < blocks.length) bytes += blockFootprint(blocks[index]);
      if (index < previous.length) bytes -= blockFootprint(previous[index]);
    }
  }
  messageFootprints.set(message, bytes);
  return bytes;
}

/** A message's events and the text it was created with. */
const ownFootprint = (message: MessageState) =>
  (message.chunkDigests.length + (message.dialect?.eventDigests.length ?? 0)) * BYTES_PER_EVENT +
  approximateSize(message.content) +
  approximateSize(message.attachments);

function blockFootprint(block: MessageBlock): number {
  let bytes = blockFootprints.get(block);
  if (bytes === undefined) {
    bytes = BYTES_PER_BLOCK + approximateSize(block);
    blockFootprints.set(block, bytes);
  }
  return bytes;
}
