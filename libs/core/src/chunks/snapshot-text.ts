import type { Chunk, ChunkOf } from './chunk-schemas.js';

/**
 * Rule 4: `text.delta` and `thinking.delta` carry the accumulated text of their part. Every one
 * is recorded, but as the suffix when it extends the part's previous snapshot (`{ append }`), and
 * whole only when it does not — so a long answer costs O(n) bytes in the log, not O(n²).
 * Replaying restores every snapshot exactly.
 */
export type StoredChunk = Chunk extends infer C
  ? C extends { type: SnapshotDelta; text: string }
    ? Omit<C, 'text'> & ({ text: string } | { append: string })
    : C
  : never;

type SnapshotDelta = 'text.delta' | 'thinking.delta' | 'translation.delta';

/** The snapshot each open part has reached; parts are independent (thinking may run inside text). */
export interface SnapshotState {
  readonly text: string;
  readonly thinking: string;
  readonly translation: string;
}

export const EMPTY_SNAPSHOTS: SnapshotState = { text: '', thinking: '', translation: '' };

const PART_OF = {
  'text.start': 'text',
  'text.delta': 'text',
  'text.complete': 'text',
  'thinking.start': 'thinking',
  'thinking.delta': 'thinking',
  'thinking.complete': 'thinking',
  'translation.delta': 'translation',
  'translation.complete': 'translation',
} as const;

const isSnapshotDelta = (type: string): type is SnapshotDelta =>
  type === 'text.delta' || type === 'thinking.delta' || type === 'translation.delta';

/**
 * `grownBy`: what the delta's text added to the part's text, when its maker knows (a translator, `GrownDelta`); a
 * text as long as the snapshot and that piece together is then taken to extend it, without comparing the two.
 */
export function encodeChunk(
  state: SnapshotState,
  chunk: Chunk,
  grownBy?: string,
): { stored: StoredChunk; state: SnapshotState } {
  if (!isSnapshotDelta(chunk.type)) return { stored: chunk, state: advance(state, chunk) };
  const part = PART_OF[chunk.type];
  const previous = state[part];
  const { text, ...rest } = chunk as ChunkOf<SnapshotDelta>;
  if (previous.length > 0 && grownBy !== undefined && previous.length + grownBy.length === text.length)
    return { stored: { ...rest, append: grownBy }, state: { ...state, [part]: previous + grownBy } };
  const stored = (
    text.startsWith(previous) && previous.length > 0
      ? { ...rest, append: text.slice(previous.length) }
      : { ...rest, text }
  ) as StoredChunk;
  return { stored, state: { ...state, [part]: text } };
}

export function decodeChunk(state: SnapshotState, stored: StoredChunk): { chunk: Chunk; state: SnapshotState } {
  if (!isSnapshotDelta(stored.type)) return { chunk: stored as Chunk, state: advance(state, stored as Chunk) };
  const part = PART_OF[stored.type];
  const { append, text } = stored as StoredChunk & { append?: string; text?: string };
  const full = append === undefined ? text! : state[part] + append;
  return { chunk: withText(stored, full), state: { ...state, [part]: full } };
}

/**
 * The delta with its whole text in place of its stored one, copied key by key: every delta of a
 * stream is decoded on every fold, and V8 builds `{ ...rest, text }` several times slower.
 */
function withText(stored: StoredChunk, text: string): Chunk {
  const chunk: Record<string, unknown> = {};
  for (const key in stored) if (key !== 'append' && key !== 'text') chunk[key] = stored[key as keyof StoredChunk];
  chunk.text = text;
  return chunk as Chunk;
}

/** A part's snapshot starts empty when the part starts and is forgotten when it completes. */
function advance(state: SnapshotState, chunk: Chunk): SnapshotState {
  switch (chunk.type) {
    case 'text.start':
    case 'text.complete':
      return { ...state, text: '' };
    case 'thinking.start':
    case 'thinking.complete':
      return { ...state, thinking: '' };
    case 'translation.complete':
      return { ...state, translation: '' };
    default:
      return state;
  }
}
