import { approximateSize, type SizeWeights } from '../approximate-size.js';
import type { MessageBlock } from '../blocks/message-block.js';
import type { MessageState, OpenSession, SessionState } from './session-events.js';

/*
 * What a fold holds in memory, measured on Node 20 against the heap of folds of each shape a producer can post
 * (docs/benchmarks.md, forty-third issue-15 round) and rounded up: the session's own fields, each message's state
 * (its maps, lists and usage), each chunk or provider event it recorded (its seq's digest, its snapshots), each block
 * (its place in the message's list, maps and positions) and the data they keep, as the heap holds it. The events'
 * data alone undercounted a fold of small tool calls fivefold, so caches of folds bounded by it outgrew the heap.
 */
const BYTES_PER_SESSION = 4_096;
const BYTES_PER_MESSAGE = 1_536;
const BYTES_PER_EVENT = 160;
const BYTES_PER_BLOCK = 128;
/**
 * Data as the heap holds it: two bytes a character at most, a string's header, an object's header, a member's or an
 * item's slot (a large object's dictionary entry is about this), its name's characters (names a producer makes up are
 * not shared), a number's box.
 */
const HEAP_WEIGHTS: SizeWeights = { character: 2, string: 24, member: 112, name: 2, item: 32, object: 48, value: 16 };

// By identity: a fold keeps unchanged messages, blocks and metadata as the same objects, so each is measured once.
const messageFootprints = new WeakMap<MessageState, number>();
const blockFootprints = new WeakMap<MessageBlock, number>();
// Large parts of data kept by a new object, as a tool block rebuilt around the same arguments.
const dataFootprints = new WeakMap<object, number>();
const dataFootprint = (data: unknown) => approximateSize(data, HEAP_WEIGHTS, dataFootprints);

/**
 * About what the fold `state` holds in memory, in bytes. `from`: a fold of the same session it grew from, with its
 * footprint: then only the messages either set since are measured, when both stand on one base of messages.
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
      let total = from.footprint - sessionFootprint(from.state) + sessionFootprint(state);
      for (const { key } of changed) {
        const before = earlier.get(key);
        total +=
          messageFootprint(state.messages.get(key)!, before) +
          shadowedFootprint(state, key) -
          (before ? messageFootprint(before) + shadowedFootprint(from.state, key) : 0);
      }
      return total;
    }
  }
  let total = sessionFootprint(state);
  for (const [key, message] of state.messages) total += messageFootprint(message) + shadowedFootprint(state, key);
  return total;
}

/**
 * What a message's earlier version, still held in the messages' base under the version the fold holds now, holds
 * besides it: its blocks that differ place by place. A producer replacing the data of the same few messages would
 * otherwise keep every replaced version uncounted (until the base is flattened). By the version that hides it.
 */
const shadowedFootprints = new WeakMap<MessageState, { readonly shadowed: MessageState; readonly bytes: number }>();

function shadowedFootprint(state: OpenSession, key: string): number {
  const shadowed = state.messages.shadowed(key);
  if (!shadowed) return 0;
  const current = state.messages.get(key)!;
  const known = shadowedFootprints.get(current);
  if (known?.shadowed === shadowed) return known.bytes;
  let bytes = BYTES_PER_MESSAGE;
  const held = shadowed.blocks.blocks;
  const now = current.blocks.blocks;
  if (held !== now)
    for (let index = 0; index < held.length; index += 1)
      if (held[index] !== now[index]) bytes += blockFootprint(held[index]);
  shadowedFootprints.set(current, { shadowed, bytes });
  return bytes;
}

/** The session's own fields: its metadata, title and writers. */
const sessionFootprint = (state: OpenSession) =>
  BYTES_PER_SESSION +
  dataFootprint(state.metadata) +
  dataFootprint(state.title) +
  dataFootprint(state.writers) +
  dataFootprint(state.opened.writers);

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
    if (blocks !== previous)
      for (let index = 0; index < Math.max(blocks.length, previous.length); index += 1) {
        if (blocks[index] === previous[index]) continue;
        if (index < blocks.length) bytes += blockFootprint(blocks[index]);
        if (index < previous.length) bytes -= blockFootprint(previous[index]);
      }
  }
  messageFootprints.set(message, bytes);
  return bytes;
}

/**
 * A message's state, its events, what it was created with, and what the texts of its parts hold: the snapshots its
 * chunks grow (kept even for a part no block holds) and its dialect translator's state.
 */
function ownFootprint(message: MessageState): number {
  const { snapshots, dialect } = message;
  let characters = snapshots.text.length + snapshots.thinking.length + snapshots.translation.length;
  for (const [id, text] of snapshots.toolArguments) characters += id.length + text.length;
  return (
    BYTES_PER_MESSAGE +
    (message.chunkDigests.length + (dialect?.eventDigests.length ?? 0)) * BYTES_PER_EVENT +
    (snapshots.toolArguments.size + 3) * HEAP_WEIGHTS.member +
    characters * HEAP_WEIGHTS.character +
    dataFootprint(message.content) +
    dataFootprint(message.attachments) +
    dataFootprint(dialect?.state)
  );
}

function blockFootprint(block: MessageBlock): number {
  let bytes = blockFootprints.get(block);
  if (bytes === undefined) {
    bytes = BYTES_PER_BLOCK + dataFootprint(block);
    blockFootprints.set(block, bytes);
  }
  return bytes;
}
