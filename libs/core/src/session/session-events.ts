import { sha256Hex } from '../hashing/hash-chain.js';
import { canonicalJson } from '../hashing/canonical-json.js';
import { evolveBlocks, initialMessageBlocks, type MessageBlocksState } from '../blocks/block-rules.js';
import type { Chunk } from '../chunks/chunk-schemas.js';
import { decodeChunk, EMPTY_SNAPSHOTS, type SnapshotState, type StoredChunk } from '../chunks/snapshot-text.js';

/**
 * A session's stream (`session-<id>`): its events, its state, and `evolve`. The same fold serves
 * the decider, point-in-time reads, projections and rebuilds.
 */
export type MessageRole = 'user' | 'assistant' | 'system' | 'tool';

export type SessionEvent =
  | { readonly type: 'session.opened'; readonly data: { readonly sessionId: string; readonly title: string | null; readonly metadata: Readonly<Record<string, unknown>> } }
  | {
      readonly type: 'message.created';
      readonly data: { readonly messageId: string; readonly role: MessageRole; readonly parentId: string | null; readonly model: string | null; readonly content: string | null };
    }
  | { readonly type: `chunk.${string}`; readonly data: ChunkEventData };

/** A chunk event's data: the stored chunk (text snapshots as suffixes) and its message. */
export type ChunkEventData = StoredChunk & { readonly messageId: string };

export const SESSION_STREAM_PREFIX = 'session-';
export const sessionStreamId = (sessionId: string) => `${SESSION_STREAM_PREFIX}${sessionId}`;

export interface MessageState {
  readonly id: string;
  readonly role: MessageRole;
  readonly parentId: string | null;
  readonly model: string | null;
  readonly content: string | null;
  readonly createdAt: string;
  /** Digest of each recorded chunk, by seq - 1: a repeated seq must carry the same chunk. */
  readonly chunkDigests: readonly string[];
  readonly snapshots: SnapshotState;
  readonly blocks: MessageBlocksState;
  /** Log position of the last event that changed this message. */
  readonly position: bigint;
}

export type SessionState =
  | { readonly status: 'absent' }
  | {
      readonly status: 'open';
      readonly sessionId: string;
      readonly title: string | null;
      readonly metadata: Readonly<Record<string, unknown>>;
      readonly createdAt: string;
      /** Messages in creation order. */
      readonly messages: ReadonlyMap<string, MessageState>;
      readonly lastMessageId: string | undefined;
      readonly position: bigint;
    };

export const initialSessionState: SessionState = { status: 'absent' };

/** What evolve needs of a recorded event. */
export interface SessionEventEnvelope {
  readonly type: string;
  readonly data: unknown;
  readonly position: bigint;
  readonly recordedAt: string;
}

export const chunkDigest = (chunk: Chunk) => sha256Hex(canonicalJson(chunk)).slice(0, 32);

/** Total and never throws: an event that does not apply leaves the state as it is. */
export function evolveSession(state: SessionState, event: SessionEventEnvelope): SessionState {
  if (event.type === 'session.opened') {
    if (state.status !== 'absent') return state;
    const data = event.data as Extract<SessionEvent, { type: 'session.opened' }>['data'];
    return { status: 'open', sessionId: data.sessionId, title: data.title, metadata: data.metadata, createdAt: event.recordedAt, messages: new Map(), lastMessageId: undefined, position: event.position };
  }
  if (state.status !== 'open') return state;
  if (event.type === 'message.created') {
    const data = event.data as Extract<SessionEvent, { type: 'message.created' }>['data'];
    if (state.messages.has(data.messageId)) return state;
    const message: MessageState = {
      id: data.messageId, role: data.role, parentId: data.parentId, model: data.model, content: data.content, createdAt: event.recordedAt,
      chunkDigests: [], snapshots: EMPTY_SNAPSHOTS, blocks: initialMessageBlocks(data.messageId), position: event.position,
    };
    return { ...state, messages: new Map(state.messages).set(message.id, message), lastMessageId: message.id, position: event.position };
  }
  if (event.type.startsWith('chunk.')) {
    const { messageId, ...stored } = event.data as StoredChunk & { messageId: string };
    const message = state.messages.get(messageId);
    if (!message || stored.seq !== message.chunkDigests.length + 1) return state;
    const { chunk, state: snapshots } = decodeChunk(message.snapshots, stored as StoredChunk);
    const next: MessageState = {
      ...message,
      chunkDigests: [...message.chunkDigests, chunkDigest(chunk)],
      snapshots,
      blocks: evolveBlocks(message.blocks, { chunk, recordedAt: event.recordedAt }),
      position: event.position,
    };
    return { ...state, messages: new Map(state.messages).set(messageId, next), position: event.position };
  }
  return state;
}
